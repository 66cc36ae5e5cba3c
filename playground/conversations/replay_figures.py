"""A replay beside its origin, turn by turn: tokens, cache reads and writes, and dollars per turn, and
the difference. The usage is each model response's (`engine.pricing.Usage`), the dollars the one price
table's (`costs.total_of`); the totals are the compare view's accounting (`selectors.accounting_figures`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from playground.conversations.costs import total_of
from playground.conversations.models import Conversation, Event
from playground.conversations.selectors import accounting_figures, cost_difference, token_numbers
from playground.engine.pricing import Usage, priced_model

FIGURES = ("tool_tokens", "input", "cache_read", "cache_write", "output", "cost_usd")
OUTSIDE_TURNS = (0, 0)  # model calls that belong to no turn of the main agent's (none today; kept visible if any)


@dataclass
class TurnFigures:
    message: int  # which of the person's messages the turn answered (1-based)
    turn: int  # the turn's number within that message's run
    tool_tokens: int = 0  # schemas + announced names sent (the engine's count, as the chart shows)
    usage: Usage = field(default_factory=Usage)
    calls: list[tuple[Any, str, str]] = field(default_factory=list)  # (usage payload, priced model, TTL)
    cost_usd: float | None = 0.0
    unpriced: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, "turn": self.turn, "tool_tokens": self.tool_tokens, "input": self.usage.uncached,
                "cache_read": self.usage.cache_read, "cache_write": self.usage.cache_write, "output": self.usage.output,
                "model_calls": len(self.calls), "cost_usd": self.cost_usd, "unpriced": self.unpriced}


def turn_figures(conversation: Conversation) -> dict[tuple[int, int], TurnFigures]:
    """(message, turn) → that main-agent turn's figures; a subagent's calls count in the turn whose
    `Agent` call ran it."""
    events = list(conversation.events.filter(type__in=("message", "turn_started", "tool_call", "model_response"))
                  .order_by("sequence").only("sequence", "type", "payload", "parent_sequence", "turn_sequence"))
    by_sequence = {e.sequence: e for e in events}
    turns: dict[int, TurnFigures] = {}
    message = turn_in_message = 0
    for event in events:
        payload = event.payload or {}
        if event.type == "message" and payload.get("role") == "user" and not event.parent_sequence:
            message, turn_in_message = message + 1, 0
        elif event.type == "turn_started" and not event.parent_sequence:
            turn_in_message += 1
            turns[event.sequence] = TurnFigures(message, turn_in_message,
                                                tool_tokens=token_numbers(payload.get("tokens") or {})["cost"])
    figures: dict[tuple[int, int], TurnFigures] = {}
    for event in (e for e in events if e.type == "model_response"):
        payload = event.payload or {}
        turn_event = by_sequence.get(event.turn_sequence)
        model = priced_model(payload.get("model"), str(((turn_event.payload or {}) if turn_event else {}).get("model") or ""))
        main = _main_turn(turn_event, by_sequence)
        row = turns.get(main.sequence) if main is not None else None
        key = (row.message, row.turn) if row is not None else OUTSIDE_TURNS
        row = figures.setdefault(key, row or TurnFigures(*OUTSIDE_TURNS))
        row.usage += Usage.of(payload.get("usage"))
        row.calls.append((payload.get("usage"), model, str(payload.get("cache_ttl") or "")))
    for row in turns.values():  # a turn whose response never came (an error) still shows its tool tokens
        figures.setdefault((row.message, row.turn), row)
    for row in figures.values():
        total = total_of(row.calls)
        row.cost_usd = round(total.usd, 6) if not total.unpriced else None
        row.unpriced = total.unpriced_models
    return dict(sorted(figures.items()))


def _main_turn(turn_event: Event | None, by_sequence: dict[int, Event]) -> Event | None:
    """The main agent's turn a turn belongs to: a subagent's turn nests under its `Agent` call's turn."""
    seen = 0
    while turn_event is not None and turn_event.parent_sequence and seen < 50:
        call = by_sequence.get(turn_event.parent_sequence)
        turn_event = by_sequence.get(call.turn_sequence) if call is not None and call.turn_sequence else None
        seen += 1
    return turn_event


def _difference(origin: dict[str, Any] | None, replay: dict[str, Any] | None) -> dict[str, Any]:
    if origin is None or replay is None:
        return {}
    difference = {name: (None if origin[name] is None or replay[name] is None else round(replay[name] - origin[name], 6))
                  for name in FIGURES}
    cost = difference["cost_usd"]
    difference["cost_text"] = "—" if cost is None else f"{'+' if cost >= 0 else '−'}${abs(cost):.4f}"
    return difference


def side_by_side(origin: Conversation | None, replay: Conversation) -> dict[str, Any]:
    """Rows per (message, turn) with the origin's and the replay's figures and replay − origin; the
    totals by the compare view's accounting, and its split of the cost difference."""
    left = {key: row.as_dict() for key, row in turn_figures(origin).items()} if origin is not None else {}
    right = {key: row.as_dict() for key, row in turn_figures(replay).items()}
    rows = [{"message": key[0], "turn": key[1], "origin": left.get(key), "replay": right.get(key),
             "difference": _difference(left.get(key), right.get(key))} for key in sorted({*left, *right})]
    sides = [accounting_figures(c) for c in (origin, replay) if c is not None]
    totals = {}
    for name, side in zip(("origin", "replay"), sides if origin is not None else [None, *sides]):
        if side is not None:
            totals[name] = {"conversation": side["conv"].pk, "provider": side["provider_label"], "wire": side["wire"],
                            "tool_tokens": side["tool_tokens"]["cost"], **side["usage"], "cost_usd": side["cost_usd"],
                            "model_calls": side["responses"], "usage_source": side["usage_source"]}
    if "origin" in totals:
        totals["difference"] = _difference(totals["origin"], totals["replay"])
    return {"rows": rows, "totals": totals, "sides": sides,
            "split": cost_difference(sides[0], sides[1]) if len(sides) == 2 else None}


def as_json(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures without the page-only parts (for the CLI's --json)."""
    return {"rows": figures["rows"], "totals": figures["totals"],
            "cost_split": None if figures["split"] is None else {
                key: round(figures["split"][key], 6) for key in ("difference", "tokens", "price", "caching")}}
