"""What an N-turn conversation that discovers K tools costs in one wire style, cached and not.

The `cost` command's engine: the conversation is planned turn by turn with `plan_turn` (the wire
request each style really sends, with the profile's cache breakpoints), each assistant reply is
made up (a ToolSearch that loads the next tools, or a call of a tool found earlier), and the
requests go through the vendor's cache model (`prompt_cache`) and the price table (`pricing`).
The all-tools baselines send every tool in full and call the same tools without searching.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from playground.engine.permissions import PermissionPolicy
from playground.engine.pricing import PriceTable
from playground.engine.prompt_cache import DEFAULT_TTL, TurnCache, account, cache_model
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.backends import get_backend
from playground.engine.tokens import CharEstimateCounter, TokenCounter
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.turn import TurnPlan, plan_turn
from playground.engine.wires.registry import wire_style, wire_styles

ALL_TOOLS = "all-tools"


# The cost command's styles (every registered one, as `toolsearch request` names it, and every tool in
# full): the AgentSettings fields each sets.
COST_WIRE_STYLES: dict[str, dict[str, Any]] = {
    **{style.command_name: {**style.default_settings(), "mode": "true"} for style in wire_styles()},
    ALL_TOOLS: {"wire": NATIVE_STYLE, "mode": "false"},
}
DEFAULT_MODEL = "claude-sonnet-4-5"
OPENAI_DEFAULT_MODEL = "gpt-5.4"  # as `toolsearch request` names it (priced in pricing.py, from a dated secondary source)
SECONDS_BETWEEN_TURNS = 30.0  # a tool call and a model reply; well inside either TTL
FIRST_USER_MESSAGE = "Please help me with this task."


@dataclass(frozen=True)
class Simulated:
    wire: str
    requests: list[tuple[float, dict[str, Any]]]
    discovered: list[str]


def vendor_of(wire: str) -> str:
    """The vendor of a cost command style (all-tools: Anthropic's native request)."""
    return wire_style(COST_WIRE_STYLES[wire]["wire"]).vendor


def default_model(wire: str) -> str:
    return OPENAI_DEFAULT_MODEL if vendor_of(wire) == "openai" else DEFAULT_MODEL


def all_tools_style(wire: str) -> dict[str, Any]:
    """The baseline in the wire style's own request shape: every permitted tool in full."""
    return {**COST_WIRE_STYLES[wire], "mode": "false"}  # the server style with the mode off sends the native request


def tools_to_discover(catalog: ToolCatalog, count: int) -> list[str]:
    """The first `count` deferred tools in catalog order: what the made-up searches load."""
    deferred = [tool.name for tool in catalog.deferred if tool.name != TOOL_SEARCH_NAME]
    if count > len(deferred):
        raise ValueError(f"--discover {count}: the catalog has only {len(deferred)} deferred tools")
    return deferred[:count]


def discovery_schedule(names: Sequence[str], turns: int) -> list[list[str]]:
    """Which tools each reply loads: spread round-robin over the replies that a later turn reads
    (turns 1 … N-1); the last reply loads nothing anyone sees."""
    replies = max(turns - 1, 0)
    schedule: list[list[str]] = [[] for _ in range(turns)]
    if replies:
        for index, name in enumerate(names):
            schedule[index % replies].append(name)
    return schedule


def simulate(catalog: ToolCatalog, wire: str, *, turns: int, discover: int, ttl: str = DEFAULT_TTL,
             model: str = "", prompt_cache: bool = True, counter: TokenCounter | None = None,
             seconds_between_turns: float = SECONDS_BETWEEN_TURNS, baseline: bool = False) -> Simulated:
    """The conversation's requests as sent, with their times. `baseline`: the all-tools conversation
    in `wire`'s request shape (every tool in full, the same tools called without searching)."""
    if wire not in COST_WIRE_STYLES:
        raise ValueError(f"unknown wire style {wire!r} (expected one of {', '.join(COST_WIRE_STYLES)})")
    counter = counter or CharEstimateCounter()
    fields = all_tools_style(wire) if baseline else COST_WIRE_STYLES[wire]
    settings = AgentSettings(model=model or default_model(wire), prompt_cache=prompt_cache, prompt_cache_ttl=ttl, **fields)
    names = tools_to_discover(catalog, discover)
    schedule = discovery_schedule(names, turns)
    backend = get_backend("default")
    policy = PermissionPolicy()
    history: list[dict[str, Any]] = [{"role": "user", "content": FIRST_USER_MESSAGE}]
    requests: list[tuple[float, dict[str, Any]]] = []
    found: list[str] = []
    for turn in range(turns):
        plan = plan_turn(catalog, policy, settings, ConversationState(history), token_counter=counter, backend=backend)
        requests.append((turn * seconds_between_turns, plan.wire_request()))
        call_id = f"toolu_sim_{turn:03d}"
        batch = schedule[turn]
        if (baseline or wire == ALL_TOOLS) and (batch or found):  # every tool is there: call it, no search
            name = batch[0] if batch else found[-1]
            found.extend(batch)
            history += _tool_call(call_id, name)
        elif batch:  # a search loads the batch: the history it leaves is the style's own
            arguments = {"query": f"select:{','.join(batch)}", "max_results": max(len(batch), 1)}
            result = plan.run_tool_search(arguments)
            found.extend(result.matches)
            style = plan.style
            history += style.discovery_messages(f"{style.search_call_prefix}sim_{turn:03d}", arguments, result,
                                                definitions=catalog.get, server_search=settings.server_search)
            if style.searches_on_server:  # the vendor searched inside its reply, which goes on to call a found tool
                history += _tool_call(call_id, result.matches[0], reply=history.pop() if history[-1].get("role") == "assistant" else None)
        elif found:
            history += _tool_call(call_id, found[-1])
        else:
            history.append({"role": "assistant", "content": [{"type": "text", "text": "Working on it."}]})
            history.append({"role": "user", "content": "Go on."})
    return Simulated(wire, requests, found)


def _tool_call(call_id: str, name: str, *, reply: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A call of `name` and its result; `reply`: the assistant message the call ends (one that searched)."""
    content = [*(reply["content"] if reply else []), {"type": "tool_use", "id": call_id, "name": name, "input": {}}]
    return [
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "done"}]},
    ]


def priced_turns(turns: Sequence[TurnCache], model: str, ttl: str, table: PriceTable) -> list[dict[str, Any]]:
    rows = []
    for turn in turns:
        cost = table.cost_usd(model, turn.uncached_tokens, 0, turn.cache_write_tokens, turn.cache_read_tokens, ttl=ttl)
        row = turn.to_dict()
        prefix = row.pop("prefix_break")
        rows.append({**row, "cost_usd": cost, "prefix_break": prefix})
    return rows


def _total(rows: Sequence[dict[str, Any]]) -> float | None:
    costs = [row["cost_usd"] for row in rows]
    return None if any(c is None for c in costs) else round(sum(costs), 8)


@dataclass(frozen=True)
class CostReport:
    figures: dict[str, Any]  # the cost command's JSON
    reasons: list[str]  # per turn: why the prefix broke ("" where it did not)


def conversation_cost(catalog: ToolCatalog, wire: str, *, turns: int, discover: int, ttl: str = DEFAULT_TTL,
                      model: str = "", table: PriceTable | None = None, counter: TokenCounter | None = None,
                      seconds_between_turns: float = SECONDS_BETWEEN_TURNS) -> CostReport:
    """The cost command's answer: the style's turns priced with caching on, and the all-tools
    conversation's total cached and uncached (input tokens only: the replies are made up)."""
    table = table or PriceTable()
    counter = counter or CharEstimateCounter()
    model = model or default_model(wire)
    if table.price(model) is None:
        raise ValueError(f"no price for model {model!r} in the price table: pass one, e.g. --prices "
                         f"'{{\"{model}\": {{\"input\": 1.25, \"output\": 10, \"cache_read\": 0.125}}}}' (or set PRICE_TABLE)")
    vendor = vendor_of(wire)

    def run(cached: bool, baseline: bool) -> list[TurnCache]:
        simulated = simulate(catalog, wire, turns=turns, discover=discover, ttl=ttl, model=model, prompt_cache=cached,
                             counter=counter, seconds_between_turns=seconds_between_turns, baseline=baseline)
        return account(simulated.requests, vendor, ttl=ttl, enabled=cached, counter=counter)

    turns_cached = run(True, baseline=False)
    rows = priced_turns(turns_cached, model, ttl, table)
    figures = {
        "wire": wire,
        "turns": rows,
        "total_cost_usd": _total(rows),
        "all_tools_cached_total_cost_usd": _total(priced_turns(run(True, baseline=True), model, ttl, table)),
        "all_tools_uncached_total_cost_usd": _total(priced_turns(run(False, baseline=True), model, ttl, table)),
    }
    return CostReport(figures, [t.prefix_break.reason if t.prefix_break else "" for t in turns_cached])


def recorded_cost(export: dict[str, Any], table: PriceTable | None = None,
                  counter: TokenCounter | None = None) -> CostReport:
    """The cost command for a conversation that ran: its export (`/conversations/<id>/export.json`)
    replayed through the cache model, each chain of requests (the main agent's, each subagent
    call's) on its own, at the times they were sent, with the vendor, TTL and caching its cache
    strips recorded. The same figures as the conversation page's strips and header, recomputed
    from the request bodies alone; the all-tools baselines need the catalog, so they are null."""
    table = table or PriceTable()
    counter = counter or CharEstimateCounter()
    events = list(export.get("events") or [])
    bodies = {(e.get("parent_sequence"), e.get("turn_sequence")): (e.get("payload") or {}).get("body") or {}
              for e in events if e.get("type") == "model_request"}
    chains: dict[Any, Any] = {}
    rows: list[dict[str, Any]] = []
    reasons: list[str] = []
    for event in events:
        if event.get("type") != "cache_strip":
            continue
        strip, chain = event.get("payload") or {}, event.get("parent_sequence")
        body = bodies.get((chain, event.get("turn_sequence"))) or {}
        if not body or body.get("too_large"):
            raise ValueError(f"event {event.get('sequence')}: its request body was not kept, so it cannot be replayed")
        if chain not in chains:
            chains[chain] = cache_model(strip.get("vendor", "anthropic"), ttl=strip.get("ttl", DEFAULT_TTL),
                                        enabled=bool(strip.get("enabled")), counter=counter)
        turn = chains[chain].send(body, float(strip.get("sent_at") or 0))
        row = priced_turns([turn], str(strip.get("model", "")), strip.get("ttl", DEFAULT_TTL), table)[0]
        rows.append({**row, "turn": len(rows) + 1})
        reasons.append(turn.prefix_break.reason if turn.prefix_break else "")
    figures = {"wire": "recorded", "conversation": (export.get("conversation") or {}).get("id"), "turns": rows,
               "total_cost_usd": _total(rows), "all_tools_cached_total_cost_usd": None,
               "all_tools_uncached_total_cost_usd": None}
    return CostReport(figures, reasons)


def first_and_steady(turn: TurnPlan, table: PriceTable, counter: TokenCounter | None = None) -> dict[str, Any]:
    """"What the model sees", cache-aware: this turn's request and its all-tools baseline (cached), each
    as a conversation's first request (nothing cached yet) and in the steady state (the same prefix sent
    again within the TTL), split and priced by the cache model and the price table."""
    counter = counter or CharEstimateCounter()
    model, ttl = turn.settings.model, turn.settings.prompt_cache_ttl
    figures: dict[str, Any] = {"model": model, "ttl": ttl, "vendor": turn.cache_vendor, "enabled": turn.caches_prompt}
    for name, request, cached in (("request", turn.wire_request(), None), ("all_tools", turn.all_tools_request(), True)):
        cache = turn.prompt_cache_model(counter, cached=cached)
        first, steady = cache.send(request, 0.0), cache.send(request, SECONDS_BETWEEN_TURNS)
        figures[name] = {label: {**split.to_dict(), "cost_usd": table.cost_usd(model, split.uncached_tokens, 0, split.cache_write_tokens,
                                                                                split.cache_read_tokens, ttl=ttl),
                                 "uncached_cost_usd": table.cost_usd(model, split.input_tokens, 0)}
                         for label, split in (("first", first), ("steady", steady))}
    return figures
