"""Recording what happens in a gateway session: the only way a `GatewayEvent` is created.

As for conversations, the next per-session sequence number is taken under a row lock and the row
is saved before anyone can see it; once the transaction commits, the session's open pages are told
(broadcast.py) and read the new rows themselves. A reload, a reconnect and a page watching live
show the same events in the same order.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from playground.gateway.broadcast import broadcast_event
from playground.gateway.models import GatewayEvent, GatewaySession


def record_event(session_pk: int, type: str, payload: dict[str, Any]) -> GatewayEvent:
    with transaction.atomic():
        sequence = (
            GatewaySession.objects.select_for_update().filter(pk=session_pk).values_list("next_sequence", flat=True).get()
        )
        # Every request of a session records an event: the list page's "last seen" follows from it.
        GatewaySession.objects.filter(pk=session_pk).update(next_sequence=F("next_sequence") + 1, last_seen_at=timezone.now())
        event = GatewayEvent.objects.create(session_id=session_pk, sequence=sequence, type=type, payload=payload)
        transaction.on_commit(lambda: broadcast_event(session_pk, sequence))
    return event
