"""Measures of an agent on a task, read from its run's events, and their statistics per profile.

A task is a person's request and the tools that would satisfy it (gold tools, with the labelled set's
`equivalent_names` accepted as the retrieval evaluation accepts them). From one conversation's typed
events (type, payload) this module reads: success (a gold tool was called and returned without an
error), first-call success (the first tool called was a gold one, and it returned without an error:
right at the first try), searches, model turns and model calls (subagents' included), tokens (cache
reads and writes apart; the API's reported usage, or the engine's estimate when the response says so
— the offline demo agent's: marked), cost in dollars from the price table, and errors by kind. Then, per profile: rates with Wilson 95 %
intervals, means, the median wall time, and between two profiles an exact McNemar test on the tasks
both completed. Plain Python: the Django side hands in the events.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from playground.engine.pricing import DEFAULT_TTL, PriceTable, Usage, priced_model, unpriced_name
from playground.engine.refusals import error_kind

WORKER_LOST = "worker_lost"  # the error of a run whose worker died: an error only when the run did not go on
Z_95 = 1.959963984540054


@dataclass
class TaskMeasures:
    success: bool = False
    first_call_success: bool = False
    first_tool: str = ""
    gold_called: list[str] = field(default_factory=list)
    tools_called: list[str] = field(default_factory=list)
    searches: int = 0
    turns: int = 0
    model_calls: int = 0  # model responses of the whole run: the main agent's turns and its subagents'
    input_tokens: int = 0  # every input token: uncached + cache written + cache read
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    tokens_estimated: bool = False  # True when some usage came from the engine's estimate (the demo agent)
    cost_usd: float | None = 0.0  # None when a model the run used has no price; cache-priced (written / read / uncached)
    uncached_cost_usd: float | None = 0.0  # the same tokens with nothing cached: the raw figure beside it
    unpriced_models: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    end_reason: str = ""  # end_turn, max_turns, error, cancelled, worker_lost …
    resumed: int = 0  # times its worker died and the run went on from the saved conversation (not an error)
    simulated_calls: int = 0  # calls a catalog-only tool answered with a simulated result
    provider: str = ""  # the provider and model of the run's first turn
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def accepted_names(expected: Sequence[str], equivalent: Mapping[str, Sequence[str]]) -> set[str]:
    names: set[str] = set()
    for gold in expected:
        names.add(gold)
        names.update(equivalent.get(gold, ()))
    return names


def measure_task(events: Iterable[tuple[str, Mapping[str, Any]]], expected: Sequence[str],
                 equivalent: Mapping[str, Sequence[str]] | None = None, *, prices: PriceTable | None = None,
                 wall_s: float = 0.0, ttl: str = DEFAULT_TTL, estimating_providers: frozenset[str] = frozenset()) -> TaskMeasures:
    """The measures of one task's conversation from its events, in sequence order. A model response
    says whether its usage is an estimate (`usage_source`); one saved before responses said so is
    an estimate when its turn's provider is one of `estimating_providers` (the caller knows them)."""
    prices = prices or PriceTable()
    accepted = accepted_names(expected, equivalent or {})
    measures = TaskMeasures(wall_s=round(wall_s, 3))
    errors: Counter[str] = Counter()
    calls: dict[str, str] = {}  # tool_use_id → name
    first_call_id = None
    model, provider = "", ""
    cost = uncached_cost = 0.0
    unpriced: set[str] = set()
    lost_workers = 0  # worker_lost errors not (yet) followed by the run going on
    pending: tuple[str, Usage] | None = None  # a response's (model, usage), priced when its strip comes

    def settle(strip: Mapping[str, Any] | None) -> None:
        nonlocal pending, cost, uncached_cost
        if pending is None:
            return
        model_priced, usage = pending
        pending = None
        # Usage is saved in one accounting for both vendors: the strip's vendor names whose figures they are.
        measures.input_tokens += usage.input_total
        measures.output_tokens += usage.output
        measures.cache_write_tokens += usage.cache_write
        measures.cache_read_tokens += usage.cache_read
        priced = prices.call_cost(usage, model_priced, str((strip or {}).get("ttl") or ttl))
        plain = prices.call_cost(Usage(uncached=usage.input_total, output=usage.output), model_priced)
        if priced is None or plain is None:
            unpriced.add(unpriced_name(model_priced))
        else:
            cost, uncached_cost = cost + priced, uncached_cost + plain

    for kind, payload in events:
        went_on = kind in ("turn_started", "status") and (kind == "turn_started" or payload.get("status") == "running")
        if lost_workers and (went_on or (kind == "turn_finished" and payload.get("final"))):
            measures.resumed, lost_workers = measures.resumed + lost_workers, 0
        if kind == "turn_started":
            model, provider = str(payload.get("model") or ""), str(payload.get("provider") or "")
            measures.provider, measures.model = measures.provider or provider, measures.model or model
            if not payload.get("subagent"):
                measures.turns += 1
        elif kind == "toolsearch_query" and not payload.get("predicted"):  # a prediction is no search of the model's
            measures.searches += 1
            if payload.get("error"):
                errors["search_error"] += 1
        elif kind == "tool_call":
            name = str(payload.get("name") or "")
            calls[str(payload.get("tool_use_id") or "")] = name
            measures.tools_called.append(name)
            if first_call_id is None:
                first_call_id, measures.first_tool = str(payload.get("tool_use_id") or ""), name
        elif kind == "tool_result":
            tool_use_id = str(payload.get("tool_use_id") or "")
            name = calls.get(tool_use_id, str(payload.get("name") or ""))
            if tool_use_id == first_call_id and tool_use_id in calls:
                measures.first_call_success = name in accepted and not payload.get("is_error")
            if payload.get("simulated"):
                measures.simulated_calls += 1
            if payload.get("is_error"):
                errors[error_kind(payload)] += 1  # by the code the result carries (refusals.py)
            elif name in accepted and name not in measures.gold_called:
                measures.gold_called.append(name)
        elif kind == "model_response":
            measures.model_calls += 1
            settle(None)  # the previous response had no cache strip after it (a run from before strips)
            pending = (priced_model(payload.get("model"), model), Usage.of(payload.get("usage")))
            source = payload.get("usage_source")
            if source == "estimate" or (not source and provider in estimating_providers):
                measures.tokens_estimated = True
        elif kind == "cache_strip":
            settle(payload)  # its vendor says how the usage splits, its TTL what a write costs
        elif kind == "error" and payload.get("kind") == WORKER_LOST:
            lost_workers += 1
        elif kind == "error":
            errors[str(payload.get("kind") or "error")] += 1
        elif kind == "cancelled":
            errors["cancelled"] += 1
        elif kind == "turn_finished" and payload.get("final"):
            measures.end_reason = str(payload.get("reason") or payload.get("stop_reason") or "")
    settle(None)
    if lost_workers:
        errors[WORKER_LOST] += lost_workers
    measures.success = bool(measures.gold_called)
    measures.errors = dict(sorted(errors.items()))
    measures.unpriced_models = sorted(unpriced)
    measures.cost_usd = None if unpriced else round(cost, 8)
    measures.uncached_cost_usd = None if unpriced else round(uncached_cost, 8)
    return measures


# -- statistics ---------------------------------------------------------------------------------------
def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a rate; (0, 0) for no trials. Honest at 0 and 1 (unlike ±1.96·se)."""
    if trials <= 0:
        return (0.0, 0.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs (a succeeded where b failed, and the
    reverse) under a fair coin. 1.0 when there are none."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return round(min(1.0, 2 * tail), 6)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _mean_tokens(values: list[int]) -> int:
    """Tokens per task in whole tokens, rounded once here (half up, exactly): the JSON, the page and
    the command line then show the same number. A mean such as 146.5 was 147 on the page
    (floatformat rounds half up) and 146 on the command line (format rounds half to even)."""
    if not values:
        return 0
    return math.floor(Fraction(sum(int(v) for v in values), len(values)) + Fraction(1, 2))


def profile_summary(profile: str, provider: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One profile's row. `items`: {"status": pending|running|done|cancelled, "measures": TaskMeasures
    as a dict or None}. Rates and means are over the completed tasks."""
    done = [item["measures"] for item in items if item.get("status") == "done" and item.get("measures")]
    successes = sum(1 for m in done if m["success"])
    first = sum(1 for m in done if m["first_call_success"])
    errors: Counter[str] = Counter()
    for m in done:
        errors.update(m.get("errors") or {})
    costs = [m["cost_usd"] for m in done if m.get("cost_usd") is not None]
    uncached = [m["uncached_cost_usd"] for m in done if m.get("uncached_cost_usd") is not None]
    walls = [float(m.get("wall_s") or 0.0) for m in done]
    return {
        "profile": profile,
        "provider": provider,
        "tasks": len(items),
        "completed": len(done),
        "success": round(successes / len(done), 4) if done else 0.0,
        "success_ci": list(wilson_interval(successes, len(done))),
        "first_call_success": round(first / len(done), 4) if done else 0.0,
        "searches_per_task": _mean([m["searches"] for m in done]),
        "turns_per_task": _mean([m["turns"] for m in done]),
        # A task measured before model calls were counted: its turns were its main agent's model calls.
        "model_calls_per_task": _mean([m.get("model_calls", m["turns"]) for m in done]),
        "input_tokens_per_task": _mean_tokens([m["input_tokens"] for m in done]),
        "output_tokens_per_task": _mean_tokens([m["output_tokens"] for m in done]),
        "cache_read_tokens_per_task": _mean_tokens([m.get("cache_read_tokens", 0) for m in done]),
        "cache_write_tokens_per_task": _mean_tokens([m.get("cache_write_tokens", 0) for m in done]),
        "cost_usd_per_task": round(sum(costs) / len(costs), 8) if costs and len(costs) == len(done) else None,
        "uncached_cost_usd_per_task": round(sum(uncached) / len(uncached), 8) if uncached and len(uncached) == len(done) else None,
        "task_p50_s": round(statistics.median(walls), 3) if walls else 0.0,
        "errors": dict(sorted(errors.items())),
        "tokens_estimated": any(m.get("tokens_estimated") for m in done),
    }


def paired_comparison(a: str, b: str, outcomes_a: Mapping[Any, bool], outcomes_b: Mapping[Any, bool]) -> dict[str, Any]:
    """Profiles a and b on the tasks both completed: the success difference (a − b) and McNemar's p."""
    shared = sorted(set(outcomes_a) & set(outcomes_b), key=str)
    only_a = sum(1 for task in shared if outcomes_a[task] and not outcomes_b[task])
    only_b = sum(1 for task in shared if outcomes_b[task] and not outcomes_a[task])
    diff = (only_a - only_b) / len(shared) if shared else 0.0
    return {"a": a, "b": b, "tasks": len(shared), "only_a": only_a, "only_b": only_b,
            "success_diff": round(diff, 4), "p_value": mcnemar_exact(only_a, only_b)}
