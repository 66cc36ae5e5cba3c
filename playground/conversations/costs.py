"""Dollars of model calls, from the one price table (registry/prices.py over engine/pricing.py, the
money module: how usage counts, which model and TTL a call is priced at, all said there).

Nothing here stores a price: a model call's saved event keeps its usage, model and cache TTL, and
its cost is read from the current table wherever it is shown (the conversation page per call and in
total, the overview per profile, a trace's span), so every page agrees and a corrected table
corrects them all. Demo-agent usage is the engine's estimate, and so is its cost (the page says so).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models.fields.json import KT

from playground.conversations.models import Event
from playground.engine.pricing import PriceTable, Usage, priced_model, unpriced_name
from playground.registry.prices import current_price_table


def call_cost(usage: Mapping[str, Any] | None, model: str, ttl: str = "", *, table: PriceTable | None = None) -> float | None:
    """Dollars of one model call (its saved `usage`); None when the model has no price."""
    return (table or current_price_table()).call_cost(Usage.of(usage), model, ttl)


@dataclass
class CostTotal:
    """The dollars of several calls; `unpriced` names the models the table has no price for."""

    usd: float = 0.0
    calls: int = 0
    priced_calls: int = 0
    unpriced: set[str] = field(default_factory=set)

    def add(self, cost: float | None, model: str) -> None:
        self.calls += 1
        if cost is None:
            self.unpriced.add(unpriced_name(model))
        else:
            self.usd += cost
            self.priced_calls += 1

    @property
    def unpriced_models(self) -> list[str]:
        return sorted(self.unpriced)


def total_of(calls: Iterable[tuple[Mapping[str, Any] | None, str, str]], *, table: PriceTable | None = None) -> CostTotal:
    """The total of (usage, model, ttl) calls."""
    table = table or current_price_table()  # a malformed PRICE_TABLE stops the processes at start
    total = CostTotal()
    for usage, model, ttl in calls:
        total.add(call_cost(usage, model, ttl, table=table), model)
    return total


def cost_of_events(events: Iterable[Event]) -> CostTotal:
    """The total of the model calls among a conversation's loaded events (the page has them all)."""
    events = list(events)
    turn_models = {e.sequence: str(e.payload.get("model") or "") for e in events if e.type == "turn_started"}
    return total_of(((e.payload.get("usage"), priced_model(e.payload.get("model"), turn_models.get(e.turn_sequence)),
                      str(e.payload.get("cache_ttl") or "")) for e in events if e.type == "model_response"))


def conversation_cost(conversation_id: int) -> CostTotal:
    """Every model call of a conversation (subagents' too), read from the database without the
    responses' content: the usage, the model (or, for older events, their turn's) and the TTL."""
    rows = (Event.objects.filter(conversation_id=conversation_id, type="model_response")
            .values_list("payload__usage", KT("payload__model"), KT("payload__cache_ttl"), "turn_sequence"))
    rows = list(rows)
    missing = {turn for _, model, _, turn in rows if not model and turn}
    turn_models = dict(Event.objects.filter(conversation_id=conversation_id, sequence__in=missing)
                       .values_list("sequence", KT("payload__model"))) if missing else {}
    return total_of(((usage, priced_model(model, turn_models.get(turn)), ttl or "") for usage, model, ttl, turn in rows))
