"""Fan-out of saved events to open pages through the channel layer.

Sending goes through `playground.realtime.send_to_group` (one channel layer per process). The
message carries only the sequence number: each consumer reads the rows it has not sent yet from
the database, so a socket never sees an event that is not saved, nor one twice.
"""
from __future__ import annotations

import logging

from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

EVENT_MESSAGE_TYPE = "conversation.event"


def conversation_group(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def broadcast_event(conversation_id: int, sequence: int) -> None:
    """Tell every page watching this conversation that event `sequence` is saved.

    Called from `transaction.on_commit`. A failed broadcast is logged, never raised: the row is
    saved, and pages pick it up on their next catch-up (the next event or a reconnect).
    """
    try:
        send_to_group(
            conversation_group(conversation_id),
            {"type": EVENT_MESSAGE_TYPE, "conversation_id": conversation_id, "sequence": sequence},
        )
    except Exception:  # noqa: BLE001 - broadcasting is best effort; the database is the record
        logger.exception("broadcast of event %s/%s failed", conversation_id, sequence)
