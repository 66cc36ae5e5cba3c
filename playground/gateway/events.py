"""Recording what happens in a gateway session: the only way a `GatewayEvent` is created.

As for conversations, the next per-session sequence number is taken under a row lock (sequences.py) and the row
is saved before anyone can see it; once the transaction commits, the session's open pages are told
(broadcast.py) and read the new rows themselves. A reload, a reconnect and a page watching live
show the same events in the same order.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from playground import telemetry
from playground.gateway import traces
from playground.gateway.broadcast import broadcast_event
from playground.gateway.models import GatewayEvent, GatewaySession
from playground.prompt_cards import tell_prompt_inbox
from playground.sequences import increment


def record_event(session_pk: int, type: str, payload: dict[str, Any]) -> GatewayEvent:  # noqa: A002 - the column's name
    with transaction.atomic():
        # One statement takes the number under the row lock (held until commit). Every request of a
        # session records an event: the list page's "last seen" follows from it.
        taken = increment(GatewaySession, session_pk, "next_sequence", assign={"last_seen_at": timezone.now()})
        if taken is None:
            raise GatewaySession.DoesNotExist(f"gateway session {session_pk} does not exist")
        sequence = int(taken[0]) - 1
        event = GatewayEvent.objects.create(session_id=session_pk, sequence=sequence, type=type, payload=payload)
        transaction.on_commit(lambda: broadcast_event(session_pk, sequence))
        if type in (GatewayEvent.Type.PERMISSION_ASKED, GatewayEvent.Type.PERMISSION_ANSWERED):
            transaction.on_commit(tell_prompt_inbox)  # the prompt inbox and the navigation bar's count
        if telemetry.enabled() and type in traces.TRACED_TYPES:
            transaction.on_commit(lambda: traces.export_event(session_pk, event))  # its span (docs/traces.md)
    return event
