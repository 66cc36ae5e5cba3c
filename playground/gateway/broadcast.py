"""Telling open session pages that a gateway event is saved, through the channel layer.

As for conversations: the message carries only the sequence number, and each socket reads the rows
it has not sent yet from the database, so a page never shows an unsaved event, nor one twice.
"""
from __future__ import annotations

import logging

from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

EVENT_MESSAGE_TYPE = "gateway.event"


def session_group(session_pk: int) -> str:
    return f"gateway-session-{session_pk}"


def broadcast_event(session_pk: int, sequence: int) -> None:
    """Called from `transaction.on_commit`. A failed broadcast is logged, never raised: the row is
    saved, and pages pick it up with the next event or on reconnect (their hello asks for it)."""
    try:
        send_to_group(session_group(session_pk), {"type": EVENT_MESSAGE_TYPE, "session": session_pk, "sequence": sequence})
    except Exception:
        logger.exception("broadcast of gateway event %s/%s failed", session_pk, sequence)
