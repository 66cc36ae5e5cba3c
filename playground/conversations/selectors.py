"""Reads for conversation pages and the socket: who may see what, the event tree, per-event view data.

The full page and the socket frames both render `conversations/_event.html` from what `event_view`
returns, so a refresh and a live page show the same thing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Exists, Min, OuterRef, Q, QuerySet

from playground.access import ADMIN, OPERATOR, VIEWER, has_role
from playground.conversations.costs import call_cost, cost_of_events
from playground.conversations.feedback import filter_by_feedback
from playground.conversations.models import Conversation, Event
from playground.conversations.providers import (
    ProviderError,
    automatic_provider_key,
    conversation_provider_key,
    provider_class,
    stand_in_for,
)
from playground.engine.pricing import Usage, priced_model
from playground.registry.prices import current_price_table

# Events the chat shows too (from `_chat_item.html`); every event but a message and streamed text is in the timeline.
CHAT_TYPES = ("message", "permission_prompt", "cancelled", "text_delta")
CHAT_ONLY_TYPES = ("message", "text_delta")


def can_view(user, conversation: Conversation) -> bool:
    """Every role watches every conversation, read-only (an audience follows a demo)."""
    return has_role(user, VIEWER)


def can_act(user, conversation: Conversation) -> bool:
    """Send, answer a permission prompt, cancel: the owner (an operator at least) or an admin."""
    return has_role(user, OPERATOR) and (conversation.owner_id == user.pk or has_role(user, ADMIN))


def conversations_to_act_on(user) -> QuerySet[Conversation]:
    """The conversations `can_act` allows `user` to act in: their own (an operator at least), or all (an admin)."""
    if not has_role(user, OPERATOR):
        return Conversation.objects.none()
    return Conversation.objects.all() if has_role(user, ADMIN) else Conversation.objects.filter(owner_id=user.pk)


def conversations_for(user) -> QuerySet[Conversation]:
    qs = Conversation.objects.select_related("owner", "profile")
    return qs if has_role(user, VIEWER) else qs.none()


def filter_conversations(qs: QuerySet[Conversation], filters: dict[str, Any]) -> QuerySet[Conversation]:
    """The list's filters (ConversationFilterForm.valid_filters()) applied in the database."""
    if filters.get("q"):
        text = filters["q"]
        # Message text lives in the chat events' payloads ({"role", "text", ...}); a key lookup
        # compares the decoded string on SQLite and PostgreSQL alike (a cast of the whole JSON
        # would also match key names and escaped characters).
        said = Event.objects.filter(conversation=OuterRef("pk"), type="message", payload__text__icontains=text)
        qs = qs.filter(Q(title__icontains=text) | Exists(said))
    if filters.get("profile"):
        qs = qs.filter(profile=filters["profile"])
    if filters.get("status"):
        qs = qs.filter(status=filters["status"])
    if filters.get("owner"):
        qs = qs.filter(owner=filters["owner"])
    if filters.get("provider"):
        qs = qs.filter(provider_is(filters["provider"]))
    if filters.get("feedback"):
        qs = filter_by_feedback(qs, filters["feedback"])
    if filters.get("task_run"):
        # The reverse side of the task run item's link (the agenteval app owns it; nothing is imported).
        qs = qs.filter(task_run_item__run_id=filters["task_run"])
    return qs


def provider_is(key: str) -> Q:
    """Conversations whose provider (conversation_provider_key) is `key`: their own choice, else
    the one their profile's snapshot kept, else their profile's, else the API key rule."""
    automatic = Q(provider="")
    no_snapshot_choice = automatic & ~Q(profile_snapshot__has_key="provider")
    # A profile's choice that resolves to `key`: `key` itself, or a provider it stands in for here.
    chosen = [k for k in settings.MODEL_PROVIDERS if stand_in_for(k) == key]
    match = Q(provider=key) | (automatic & Q(profile_snapshot__provider__in=chosen)) | (no_snapshot_choice & Q(profile__provider__in=chosen))
    if key == automatic_provider_key():
        match |= no_snapshot_choice & (Q(profile__isnull=True) | Q(profile__provider=""))
    return match


def list_rows(qs: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """One row per conversation, except a compare run: its group is one row, held by the group's
    first conversation among `qs`, so paging counts groups as the page shows them."""
    firsts = qs.exclude(compare_group="").order_by().values("compare_group").annotate(first=Min("pk")).values("first")
    return qs.filter(Q(compare_group="") | Q(pk__in=firsts))


def compare_members(user, groups: list[str]) -> dict[str, list[Conversation]]:
    """The conversations `user` may see in each compare group, in the order the compare view shows them."""
    members: dict[str, list[Conversation]] = {group: [] for group in groups}
    for conversation in conversations_for(user).filter(compare_group__in=groups).order_by("pk"):
        members[conversation.compare_group].append(conversation)
    return members


def conversation_export_data(conversation: Conversation) -> dict[str, Any]:
    """What /conversations/<id>/export.json holds: the conversation and its events in the stored
    schema (events.py), payloads as saved, which is what the page renders."""
    events = conversation.events.order_by("sequence").values(
        "sequence", "type", "payload", "parent_sequence", "turn_sequence", "created_at")
    return {
        "conversation": {
            "id": conversation.pk,
            "title": str(conversation),
            "profile": conversation.profile_snapshot or {},
            "provider": conversation_provider_key(conversation),
            "owner": conversation.owner.get_username(),
            "status": conversation.status,
            "compare_group": conversation.compare_group,
            "replay_of": conversation.replay_of_id,  # the conversation this one replays (replays.py), or null
            "created_at": conversation.created_at,
        },
        "events": list(events),
    }


def provider_label(conversation: Conversation) -> str:
    key = conversation_provider_key(conversation)
    try:
        return provider_class(key).label
    except (ProviderError, ImportError):
        return key


def token_numbers(tokens: dict[str, Any]) -> dict[str, Any]:
    """Sent vs all-tools baseline from the engine's `TokenAccounting.to_dict()`, with bar widths.

    "saved" is read as the engine stored it for the turn: the baseline minus the tools sent *and*
    the announced deferred names, the price of deferring (the model view shows the same figure).
    """
    sent = int(tokens.get("sent_tokens") or 0)
    baseline = int(tokens.get("baseline_tokens") or 0)
    announced = int(tokens.get("announcement_tokens") or 0)
    scale = max(sent + announced, baseline, 1)
    saved = int(tokens.get("saved_tokens") or 0)
    return {
        "sent": sent,
        "announced": announced,
        "cost": sent + announced,
        "baseline": baseline,
        "sent_pct": round(100 * (sent + announced) / scale, 1),
        "baseline_pct": round(100 * baseline / scale, 1),
        "saved": saved,
        "saved_pct": tokens.get("saved_percent") or 0,
        # The whole request against the context window (older turns did not count it: never flagged).
        "request": int(tokens.get("request_tokens") or 0),
        "window": int(tokens.get("context_window") or 0),
        "over_window": bool(tokens.get("over_window")),
    }


def event_view(event: Event, *, turn_model: str = "") -> dict[str, Any]:
    """Template data derived from one event's payload (score bars, token bars, a call's dollars).

    `turn_model`: the model of the turn a model response belongs to, for older responses that do not
    name it."""
    payload = event.payload or {}
    view: dict[str, Any] = {}
    if event.type == "turn_started":
        view["tokens"] = token_numbers(payload.get("tokens") or {})
        # Payloads keep the first names of long lists and the full counts (older events: the lists).
        for kind in ("loaded", "deferred"):
            names = payload.get(f"{kind}_tools") or []
            count = payload.get(f"{kind}_count", len(names))
            view[f"{kind}_count"], view[f"{kind}_more"] = count, max(count - len(names), 0)
    elif event.type == "toolsearch_query":
        scored = payload.get("scored") or []
        top = max((s.get("score", 0) for s in scored), default=0) or 1
        view["scored"] = [{**s, "pct": round(100 * max(s.get("score", 0), 0) / top, 1)} for s in scored]
    elif event.type == "model_response":
        view["tool_uses"] = [b for b in payload.get("content", []) if b.get("type") == "tool_use"]
        model = priced_model(payload.get("model"), turn_model)
        view["cost"] = {"usd": call_cost(payload.get("usage"), model, str(payload.get("cache_ttl") or "")), "model": model}
    elif event.type == "cache_strip":
        view.update(cache_strip_view(payload))
    return view


CACHE_PARTS = ("cache_write_tokens", "cache_read_tokens", "uncached_tokens")


def cache_strip_view(payload: dict[str, Any]) -> dict[str, Any]:
    """A strip's bar widths, and how the API's reported split differs from the model's (per part)."""
    total = max(int(payload.get("input_tokens") or 0), 1)
    reported = payload.get("reported") or {}
    differences = {part: int(reported.get(part, 0)) - int(payload.get(part) or 0) for part in ("input_tokens", *CACHE_PARTS)} if reported else {}
    return {
        "bar": {part: round(100 * int(payload.get(part) or 0) / total, 1) for part in CACHE_PARTS},
        "differences": {part.removesuffix("_tokens").replace("cache_", ""): diff for part, diff in differences.items() if diff},
    }


def cache_total(strips: list[Event]) -> dict[str, Any]:
    """The conversation's prompt-cache figures: every strip's split summed (subagents' requests are
    billed too), the cache-priced cost, the same input uncached, and the all-tools baseline cached."""
    payloads = [e.payload or {} for e in strips]

    def tokens(key: str, of: str = "") -> int:
        return sum(int(((p.get(of) or {}) if of else p).get(key) or 0) for p in payloads)

    def dollars(key: str, of: str = "") -> float | None:
        values = [((p.get(of) or {}) if of else p).get(key) for p in payloads]
        return None if not values or any(v is None for v in values) else round(sum(values), 6)

    total = {"requests": len(payloads), **{part: tokens(part) for part in ("input_tokens", *CACHE_PARTS)},
             "cost_usd": dollars("cost_usd"), "uncached_cost_usd": dollars("uncached_cost_usd"),
             "all_tools_input_tokens": tokens("input_tokens", "all_tools"),
             "all_tools_cost_usd": dollars("cost_usd", "all_tools"),
             "all_tools_uncached_cost_usd": dollars("uncached_cost_usd", "all_tools"),
             "breaks": sum(1 for p in payloads if p.get("prefix_break")),
             "differs": sum(1 for p in payloads if cache_strip_view(p)["differences"]),
             "enabled": any(p.get("enabled") for p in payloads)}
    baseline = total["all_tools_cost_usd"]
    total["saved_pct"] = (round(100 * (baseline - total["cost_usd"]) / baseline, 1)
                          if baseline and total["cost_usd"] is not None else None)
    total["more_pct"] = -total["saved_pct"] if total["saved_pct"] is not None and total["saved_pct"] < 0 else None
    return total


def cache_total_for(conversation_id: int) -> dict[str, Any]:
    return cache_total(list(Event.objects.filter(conversation_id=conversation_id, type="cache_strip").order_by("sequence")))


@dataclass
class EventNode:
    event: Event
    view: dict[str, Any]
    children: list[EventNode] = field(default_factory=list)
    answer: Event | None = None  # permission prompts: the answer, once given


def event_tree(events: list[Event]) -> list[EventNode]:
    """Timeline nodes: turns hold their events, an Agent call holds its subagent's turns."""
    nodes: dict[int, EventNode] = {}
    roots: list[EventNode] = []
    answers = {e.payload.get("prompt_sequence"): e for e in events if e.type == "permission_answer"}
    turns = 0
    for event in events:
        if event.type in CHAT_ONLY_TYPES:
            continue  # the chat side shows these
        turn = nodes.get(event.turn_sequence) if event.turn_sequence else None
        turn_model = str(turn.event.payload.get("model") or "") if turn is not None else ""
        node = EventNode(event, event_view(event, turn_model=turn_model), answer=answers.get(event.sequence))
        if event.type == "turn_started" and not event.parent_sequence:
            turns += 1
            node.view["number"] = turns  # over the conversation, as the chart counts: the stored turn restarts per message
        nodes[event.sequence] = node
        parent = nodes.get(event.turn_sequence) if event.turn_sequence else None
        if parent is None and event.parent_sequence:
            parent = nodes.get(event.parent_sequence)
        (parent.children if parent else roots).append(node)
    return roots


def chat_items(events: list[Event]) -> list[EventNode]:
    """The chat: messages, prompts, cancel notes, and — for a reply still being written — the text its
    `text_delta` events have brought so far, as one bubble (the live page grew it from the same rows).
    Once the turn's assistant message is saved, it replaces that bubble."""
    answers = {e.payload.get("prompt_sequence"): e for e in events if e.type == "permission_answer"}
    replied = {e.turn_sequence for e in events if e.type == "message" and (e.payload or {}).get("role") == "assistant"}
    items: list[EventNode] = []
    streaming: dict[int | None, EventNode] = {}
    for event in events:
        if event.type == "text_delta":
            if event.turn_sequence in replied:
                continue
            node = streaming.get(event.turn_sequence)
            if node is None:
                node = streaming[event.turn_sequence] = EventNode(event, {"text": ""})
                items.append(node)
            node.view["text"] += (event.payload or {}).get("text", "")
        elif event.type in CHAT_TYPES:
            items.append(EventNode(event, {}, answer=answers.get(event.sequence)))
    return items


def turn_rows(events: list[Event]) -> list[dict[str, Any]]:
    """One chart row per main-agent turn: tokens sent vs the all-tools baseline.

    `number` counts turns across the whole conversation: the stored `turn` restarts with each message.
    """
    turns = (e for e in events if e.type == "turn_started" and not e.parent_sequence)
    return [{"event": e, "numbers": token_numbers(e.payload.get("tokens") or {}), "number": n} for n, e in enumerate(turns, 1)]


def tokens_total(events: list[Event]) -> dict[str, int]:
    rows = turn_rows(events)
    return {
        "sent": sum(r["numbers"]["sent"] for r in rows),
        "announced": sum(r["numbers"]["announced"] for r in rows),
        "cost": sum(r["numbers"]["cost"] for r in rows),
        "baseline": sum(r["numbers"]["baseline"] for r in rows),
        "turns": len(rows),
        "over_window": sum(1 for r in rows if r["numbers"]["over_window"]),
        "largest_request": max((r["numbers"]["request"] for r in rows), default=0),
        "window": max((r["numbers"]["window"] for r in rows), default=0),
    }


def tokens_total_for(conversation_id: int) -> dict[str, int]:
    return tokens_total(list(Event.objects.filter(conversation_id=conversation_id, type="turn_started", parent_sequence__isnull=True)))


def turn_wire(payload: dict[str, Any]) -> str:
    """The wire style a turn's request went out in, as its saved turn event says (`TurnPlan.wire`:
    OpenAI's style for an OpenAI model; events saved before it had only the planned `wire_style`)."""
    return str(payload.get("wire") or payload.get("wire_style") or "")


def header_wire(conversation: Conversation, events: list[Event]) -> dict[str, str]:
    """The header's wire style: the latest turn's as it went out; the profile's before the first turn."""
    for event in reversed(events):
        if event.type == "turn_started" and not event.parent_sequence and turn_wire(event.payload or {}):
            return {"style": turn_wire(event.payload or {}), "source": "turn"}
    return {"style": str((conversation.profile_snapshot or {}).get("wire_style") or ""), "source": "profile"}


def panel_context(conversation: Conversation, user=None) -> dict[str, Any]:
    events = list(conversation.events.order_by("sequence"))
    # The status is re-read after the events (each status change is saved with its event): read
    # before, a page loaded while the final turn finishes shows "running" forever, because the
    # socket's catch-up then has no later event to correct it with.
    conversation.refresh_from_db(fields=["status"])
    return {
        "conv": conversation,
        "tree": event_tree(events),
        "chat": chat_items(events),
        "chart": turn_rows(events),
        "total": tokens_total(events),
        "cost": cost_of_events(events),
        "cache": cache_total([e for e in events if e.type == "cache_strip"]),
        "last_sequence": events[-1].sequence if events else 0,
        "wire": header_wire(conversation, events),
        "provider_label": provider_label(conversation),
        "offline": _is_offline(conversation),
        # The frames are the same for everyone; the page of someone who only watches hides the
        # forms in them (and the server refuses what they would send).
        "can_act": can_act(user, conversation),
    }


def _is_offline(conversation: Conversation) -> bool:
    key = conversation_provider_key(conversation)
    try:
        return bool(provider_class(key).offline)
    except (ProviderError, ImportError):
        return False


# Bookkeeping an audience does not follow: shown with the step before them (present.js), not steps
# of their own (6 turns made 26 steps, some of them "open Announcement").
PRESENT_QUIET_TYPES = ("announcement_sent", "model_request", "model_response", "cache_strip", "status", "turn_finished")


def presentation_context(conversation: Conversation) -> dict[str, Any]:
    """Presentation mode: the page's chat and timeline (the same templates), replayed a step at a time
    in the browser, beside the tool tokens per turn and the dollars so far. A step is one saved event
    an audience follows, in sequence order — a message, a turn, a search, a call, its result, a
    prompt, the run's end; bookkeeping events (PRESENT_QUIET_TYPES) appear with the step before them,
    and streamed text is not a step (the replay types each assistant message out instead)."""
    panel = panel_context(conversation, None)
    steps = conversation.events.exclude(type="text_delta").exclude(
        Q(type__in=PRESENT_QUIET_TYPES) & ~Q(type="turn_finished", payload__final=True)).count()
    return {**panel, "steps": steps, "quiet_types": " ".join(PRESENT_QUIET_TYPES)}


# -- compare: figures by one accounting (kept apart from the rest for easy merges) ----------------------
USAGE_SOURCES = {
    "reported": "as the API reported it",
    "estimate": "the engine's estimate (the offline demo agent reports no usage)",
    "": "not labelled (recorded before usage was labelled)",
}


def accounting_figures(conversation: Conversation) -> dict[str, Any]:
    """One side of a comparison by one accounting for both vendors: the wire style, the tool tokens
    per turn (`TurnPlan.wire_tokens`: what the model sees of the tools, the same counter for every
    wire), the usage of every model response (input as the uncached part, cache reads and writes
    beside it, output; the API's when it reported one, the engine's estimate otherwise, labelled) and
    its dollars as the conversation page prices them (`costs.cost_of_events`: the one price table)."""
    events = list(conversation.events.filter(type__in=("turn_started", "model_request", "model_response")).order_by("sequence"))
    models = {e.turn_sequence: (e.payload or {}).get("model", "") for e in events if e.type == "model_request"}
    total = Usage()
    sources: dict[str, None] = {}
    for event in (e for e in events if e.type == "model_response"):
        payload = event.payload or {}
        total += Usage.of(payload.get("usage"))
        sources.setdefault(payload.get("usage_source", ""), None)
    cost = cost_of_events(events)
    turns = [e for e in events if e.type == "turn_started" and not e.parent_sequence]
    wires = list(dict.fromkeys(turn_wire(e.payload or {}) for e in turns))
    label, offline = provider_label(conversation), _is_offline(conversation)
    turn_models = {e.sequence: str((e.payload or {}).get("model") or "") for e in turns}
    return {
        "conv": conversation,
        "provider_label": label,
        "offline": offline,
        # Beside the "offline demo agent" badge, only what the label adds to it ("(OpenAI wire)").
        "label_beyond_badge": label.replace("offline demo agent", "").strip() if offline else label,
        # (usage, the model it is priced at, cache TTL) of each model call: what cost_difference re-prices.
        "calls": [(Usage.of((e.payload or {}).get("usage")),
                   priced_model((e.payload or {}).get("model"), models.get(e.turn_sequence) or turn_models.get(e.turn_sequence)),
                   str((e.payload or {}).get("cache_ttl") or "")) for e in events if e.type == "model_response"],
        "wire": ", ".join(w for w in wires if w) or (conversation.profile_snapshot or {}).get("wire_style", ""),
        "models": ", ".join(dict.fromkeys(m for m in models.values() if m)),
        "tool_tokens": tokens_total(turns),
        "usage": {"input": total.uncached, "output": total.output, "cache_read": total.cache_read, "cache_write": total.cache_write},
        "input_total": total.input_total,
        "usage_source": "; ".join(USAGE_SOURCES.get(s, s) for s in sources) or "no model response yet",
        "cost_usd": round(cost.usd, 6),
        "unpriced": [f"no price for {model} in the price table (PRICE_TABLE)" for model in cost.unpriced_models],
        "responses": sum(1 for e in events if e.type == "model_response"),
    }


def _uncached(usage: Usage) -> Usage:
    """The same call with every input token billed at the uncached rate (no cache read or write)."""
    return Usage(uncached=usage.input_total, output=usage.output)


def cost_difference(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any] | None:
    """What the left side's cost minus the right side's is made of, in dollars, so that the three parts
    add up to it exactly:

    - tokens: both sides' calls priced alike (at the left side's model, no caching) — the number of
      model calls (turns) and the tokens each one sent;
    - price: the right side's calls at its own models' rates rather than the left's;
    - caching: minus what each side's prompt cache saved against paying every input token in full.

    None when a call's model has no price (then no split is honest)."""
    table = current_price_table()
    left_model = next((model for _, model, _ in left["calls"] if model), "")

    def total(calls, *, model: str = "", cached: bool = True) -> float | None:
        dollars = 0.0
        for usage, call_model, ttl in calls:
            cost = table.call_cost(usage if cached else _uncached(usage), model or call_model, ttl)
            if cost is None:
                return None
            dollars += cost
        return dollars

    figures = [total(left["calls"]), total(left["calls"], cached=False), total(right["calls"]),
               total(right["calls"], cached=False), total(right["calls"], model=left_model, cached=False)]
    if not left["calls"] or not right["calls"] or any(f is None for f in figures):
        return None
    left_cost, left_full, right_cost, right_full, right_at_left_prices = figures
    left_saved, right_saved = left_full - left_cost, right_full - right_cost
    return {
        "difference": left_cost - right_cost,
        "tokens": left_full - right_at_left_prices,
        "price": right_at_left_prices - right_full,
        "caching": -(left_saved - right_saved),
        "left_saved": left_saved, "right_saved": right_saved,
        "left_calls": len(left["calls"]), "right_calls": len(right["calls"]),
        "left_input": left["input_total"], "right_input": right["input_total"],
        "left_model": left_model,
        "shown": {key: _signed_usd(value) for key, value in (("tokens", left_full - right_at_left_prices),
                  ("price", right_at_left_prices - right_full), ("caching", -(left_saved - right_saved)))},
        "abs_difference": f"${abs(left_cost - right_cost):.4f}",
    }


def _signed_usd(value: float) -> str:
    return f"{'+' if value >= 0 else '−'}${abs(value):.4f}"
