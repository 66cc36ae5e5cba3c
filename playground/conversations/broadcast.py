"""Fan-out of saved events to open pages through the channel layer.

Sending goes through `playground.realtime.send_to_group` (one channel layer per process). The
message carries the sequence number and, rendered once here for every socket watching, the frame
the browser needs: a consumer that has sent everything up to `sequence - 1` forwards the frame
without touching the database. A consumer that sees a gap (a frame lost, or two writers whose
broadcasts crossed) reads the rows it has not sent yet from the database instead, so a socket never
sees an event that is not saved, nor one twice. The frame is the same for every member watching:
it is rendered without a request (no user, no CSRF token: its forms are sent over the socket). While
the conversation has a working share link, a second frame is rendered for its anonymous sockets
(`shared_frame`: no forms, no account names, no internal id).
"""
from __future__ import annotations

import logging
import time

from django.utils import timezone

from playground.conversations.fragments import render_event_frame
from playground.conversations.models import Conversation, Event, ShareLink
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

EVENT_MESSAGE_TYPE = "conversation.event"
# Frames above this go by sequence number only (the consumer renders them from the row): the channel
# layer keeps every message in Redis until each socket has read it. Payloads are bounded (events.py),
# so this is rare: a model request with a large body.
MAX_FRAME_IN_MESSAGE = 256 * 1024


def conversation_group(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def broadcast_event(conversation_id: int, sequence: int, *, event: Event | None = None, status: str = "") -> None:
    """Tell every page watching this conversation that event `sequence` is saved.

    `event` (the saved row) and `status` (the conversation's status as that row was committed) let
    the frame be rendered here once. Called from `transaction.on_commit`. A failed broadcast is
    logged, never raised: the row is saved, and pages pick it up on their next catch-up (the next
    event or a reconnect).
    """
    message = {"type": EVENT_MESSAGE_TYPE, "conversation_id": conversation_id, "sequence": sequence}
    if event is not None and status:
        try:
            frames = {"frame": _render(conversation_id, event, status)}
            if _is_shared(conversation_id):
                frames["shared_frame"] = _render(conversation_id, event, status, shared=True)
        except Exception:
            logger.exception("rendering event %s/%s for broadcast failed", conversation_id, sequence)
        else:
            message.update({key: frame for key, frame in frames.items() if len(frame) <= MAX_FRAME_IN_MESSAGE})
    try:
        send_to_group(conversation_group(conversation_id), message)
    except Exception:
        logger.exception("broadcast of event %s/%s failed", conversation_id, sequence)


def _render(conversation_id: int, event: Event, status: str, *, shared: bool = False) -> str:
    # The frame needs only the conversation's id and status (as of this event): no read for them.
    return render_event_frame(Conversation(pk=conversation_id, status=status), event, shared=shared)


# Whether a conversation has a working share link, as last read (monotonic time, answer) per conversation.
# Read at most once per SHARE_STATE_SECONDS, not once per event: the query cost more than rendering an
# event's frame (0.70 vs 0.29 ms on PostgreSQL, docs/benchmarks.md). A stale answer is safe either way:
# without `shared_frame` an anonymous socket reads the rows itself (`consumers.conversation_event`), and
# a frame rendered for a link just revoked goes to no socket (revoking closes them).
SHARE_STATE_SECONDS = 2.0
_share_state: dict[int, tuple[float, bool]] = {}


def _is_shared(conversation_id: int) -> bool:
    now = time.monotonic()
    known = _share_state.get(conversation_id)
    if known is not None and now - known[0] < SHARE_STATE_SECONDS:
        return known[1]
    shared = ShareLink.objects.filter(conversation_id=conversation_id, revoked_at__isnull=True,
                                      expires_at__gt=timezone.now()).exists()
    if len(_share_state) > 10_000:  # a long-lived worker: forget the old ones
        _share_state.clear()
    _share_state[conversation_id] = (now, shared)
    return shared
