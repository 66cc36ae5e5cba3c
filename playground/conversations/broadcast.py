"""Fan-out of saved events to open pages through the channel layer.

This module owns the channel layer on the sending side; nothing else calls `group_send`. The
message carries only the sequence number: each consumer reads the rows it has not sent yet from
the database, so a socket never sees an event that is not saved, nor one twice.
"""
from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

logger = logging.getLogger(__name__)

EVENT_MESSAGE_TYPE = "conversation.event"


def conversation_group(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


async def _send(group: str, message: dict) -> None:
    # A fresh layer per send, closed afterwards: Celery workers call this from plain threads where
    # each async_to_sync runs its own event loop, and a Redis connection kept from a previous loop
    # fails with "Event loop is closed" (channels_redis #332).
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    try:
        await layer.group_send(group, message)
    finally:
        close = getattr(layer, "close_pools", None)
        if close is not None:
            await close()


def broadcast_event(conversation_id: int, sequence: int) -> None:
    """Tell every page watching this conversation that event `sequence` is saved.

    Called from `transaction.on_commit`. A failed broadcast is logged, never raised: the row is
    saved, and pages pick it up on their next catch-up (the next event or a reconnect).
    """
    try:
        async_to_sync(_send)(
            conversation_group(conversation_id),
            {"type": EVENT_MESSAGE_TYPE, "conversation_id": conversation_id, "sequence": sequence},
        )
    except Exception:  # noqa: BLE001 - broadcasting is best effort; the database is the record
        logger.exception("broadcast of event %s/%s failed", conversation_id, sequence)
