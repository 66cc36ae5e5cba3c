"""Recording what happens in a gateway session: the only way a `GatewayEvent` is created.

As for conversations: the next per-session sequence number is taken under a row lock, the row is
saved, and only after the transaction commits is anyone told (the detail page's live refresh reads
rows by sequence, so a reload and a live page show the same events in the same order).
"""
from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F

from playground.gateway.models import GatewayEvent, GatewaySession

logger = logging.getLogger(__name__)


def record_event(session_pk: int, type: str, payload: dict[str, Any]) -> GatewayEvent:
    with transaction.atomic():
        sequence = (
            GatewaySession.objects.select_for_update().filter(pk=session_pk).values_list("next_sequence", flat=True).get()
        )
        GatewaySession.objects.filter(pk=session_pk).update(next_sequence=F("next_sequence") + 1)
        event = GatewayEvent.objects.create(session_id=session_pk, sequence=sequence, type=type, payload=payload)
    return event
