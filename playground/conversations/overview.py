"""The overview's figures: tokens, dollars, model-call latency and errors over time, split by profile,
provider, model, user or kind of conversation (interactive, compare, task run, replay), and filtered by any of them.

Everything is aggregated in the database over the saved events (an index on (type, created_at) finds a
period's rows): model calls are summed per time bucket, group, model and cache TTL, and only those
few groups are priced here, with the one price table (costs.py) — a price is linear in tokens, so the
sum of the calls' dollars is the dollars of their summed tokens. Latency percentiles are PostgreSQL's
`percentile_cont`; on SQLite (no percentile function) the durations of the period are read and the
same interpolation is done here. Older model-call events that do not name their model take their
turn's (one indexed lookup each). Nothing secret is read: counts, tokens, models and durations.
"""
from __future__ import annotations

import math
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Aggregate, DateTimeField, Count, F, FloatField, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, NullIf, Trunc
from django.utils import timezone

from playground.conversations.models import Conversation, Event
from playground.conversations.providers import provider_label
from playground.engine.pricing import Usage, unpriced_name
from playground.registry.models import AgentProfile
from playground.registry.prices import current_price_table

# period → (how far back, bucket size)
PERIODS: dict[str, tuple[timedelta, str]] = {
    "24h": (timedelta(hours=24), "hour"),
    "7d": (timedelta(days=7), "day"),
    "30d": (timedelta(days=30), "day"),
    "90d": (timedelta(days=90), "week"),
}
DEFAULT_PERIOD = "7d"
METRICS = {
    "cost": "Dollars",
    "tokens": "Tokens (input + output)",
    "p95_ms": "Model call p95 (ms)",
    "errors": "Errors (run + tool)",
}
NO_PROFILE = "(no profile)"
UNKNOWN = "(unknown)"
# What a row is: the split's key expression lives in `_group_key`, its label in `_labels`.
SPLITS = {"profile": "Profile", "provider": "Provider", "model": "Model", "user": "User", "kind": "Kind"}
DEFAULT_SPLIT = "profile"


@dataclass(frozen=True)
class UsageFilters:
    """Which conversations' events count (None / "": no restriction)."""

    profile_id: int | None = None
    user_id: int | None = None
    provider: str = ""
    model: str = ""
    kind: str = ""


class PercentileCont(Aggregate):
    """PostgreSQL's ordered-set aggregate: the continuous percentile of an expression."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


def percentile(values: list[float], fraction: float) -> float | None:
    """The same interpolation as percentile_cont, for a database without it."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Cell:
    """One bucket of one profile (or a profile's whole period)."""

    calls: int = 0
    runs: int = 0
    input_tokens: int = 0  # every input token: uncached + cache written + cache read
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost: float = 0.0
    unpriced: set[str] = field(default_factory=set)
    p50_ms: float | None = None
    p95_ms: float | None = None
    run_errors: int = 0
    tool_errors: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def errors(self) -> int:
        return self.run_errors + self.tool_errors

    @property
    def empty(self) -> bool:
        return not (self.calls or self.runs or self.errors)


@dataclass
class Overview:
    period: str
    bucket: str
    since: datetime
    buckets: list[datetime]
    groups: list[tuple[Any, str]]  # (key, label), busiest first: a profile's or user's id, a provider, model or kind
    cells: dict[tuple[datetime, Any], Cell]
    totals: dict[Any, Cell]
    split: str = DEFAULT_SPLIT

    def rows(self) -> list[dict[str, Any]]:
        """The table: one row per non-empty (bucket, group), newest bucket first."""
        labels = dict(self.groups)
        rows = []
        for bucket in reversed(self.buckets):
            for key, _ in self.groups:
                cell = self.cells.get((bucket, key))
                if cell is not None and not cell.empty:
                    rows.append({"bucket": bucket, "key": key, "group": labels[key], "cell": cell})
        return rows

    def series(self, metric: str) -> list[dict[str, Any]]:
        """Per group, the metric's value in each bucket (None where there is nothing)."""
        out = []
        for key, label in self.groups:
            values = []
            for bucket in self.buckets:
                cell = self.cells.get((bucket, key))
                values.append(metric_value(cell, metric) if cell is not None else None)
            out.append({"key": key, "group": label, "values": values})
        return out


def metric_value(cell: Cell, metric: str) -> float | None:
    if metric == "cost":
        return round(cell.cost, 8)
    if metric == "tokens":
        return float(cell.tokens)
    if metric == "p95_ms":
        return cell.p95_ms
    return float(cell.errors)


def truncate(moment: datetime, kind: str) -> datetime:
    """What the database's Trunc gives, in the current time zone."""
    local = timezone.localtime(moment)
    if kind == "hour":
        return local.replace(minute=0, second=0, microsecond=0)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "week":
        day -= timedelta(days=day.weekday())
    return day


def bucket_starts(since: datetime, now: datetime, kind: str) -> list[datetime]:
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}[kind]
    starts, current = [], truncate(since, kind)
    end = truncate(now, kind)
    while current <= end:
        starts.append(current)
        # Whole days and weeks are stepped in local time and truncated again (a DST change moves the hour).
        current = truncate(current + step + (timedelta(hours=2) if kind != "hour" else timedelta()), kind)
    return starts


def overview(period: str = DEFAULT_PERIOD, profile_id: int | None = None, *, split: str = DEFAULT_SPLIT,
             filters: UsageFilters | None = None, now: datetime | None = None) -> Overview:
    span, kind = PERIODS[period]
    now = now or timezone.now()
    since = now - span
    filters = filters or UsageFilters(profile_id=profile_id)
    events = filtered_events(Event.objects.filter(created_at__gte=since, created_at__lte=now), filters)
    bucketed = events.annotate(bucket=Trunc("created_at", kind), group_key=_group_key(split))

    cells: dict[tuple[datetime, Any], Cell] = defaultdict(Cell)
    totals: dict[Any, Cell] = defaultdict(Cell)
    with _grouped_reads():
        _add_calls(bucketed, cells, totals)
        _add_latency(bucketed, events.annotate(group_key=_group_key(split)), cells, totals)
        _add_counts(bucketed, cells, totals)

    busy = sorted(totals, key=lambda key: (-totals[key].calls, -totals[key].runs, str(key)))
    labels = _labels(split, busy)
    return Overview(period=period, bucket=kind, since=since, buckets=bucket_starts(since, now, kind),
                    groups=[(key, labels[key]) for key in busy], cells=dict(cells), totals=dict(totals), split=split)


def period_usage(since: datetime, now: datetime, filters: UsageFilters) -> Cell:
    """One cell for every matching event from `since` to `now`: what a budget has spent (budgets.py)."""
    return period_totals(since, now, filters).get("", Cell())


def period_totals(since: datetime, now: datetime, filters: UsageFilters, split: str | None = None) -> dict[Any, Cell]:
    """The model calls' figures from `since` to `now` in one grouped read: per `split`'s key, or all under ""."""
    events = filtered_events(Event.objects.filter(created_at__gte=since, created_at__lte=now), filters)
    key = _group_key(split) if split else Value("", output_field=TextField())
    bucketed = events.annotate(bucket=Value(since, output_field=DateTimeField()), group_key=key)
    cells: dict[tuple[datetime, Any], Cell] = defaultdict(Cell)
    totals: dict[Any, Cell] = defaultdict(Cell)
    with _grouped_reads():
        _add_calls(bucketed, cells, totals)
    return dict(totals)


def filtered_events(events: QuerySet, filters: UsageFilters) -> QuerySet:
    if filters.profile_id is not None:
        events = events.filter(conversation__profile_id=filters.profile_id)
    if filters.user_id is not None:
        events = events.filter(conversation__owner_id=filters.user_id)
    if filters.kind:
        events = events.filter(conversation__kind=filters.kind)
    if filters.provider:
        events = events.annotate(provider_key=_group_key("provider")).filter(provider_key=filters.provider)
    if filters.model:
        events = events.annotate(model_key=_group_key("model")).filter(model_key=filters.model)
    return events


def _turn_fact(name: str) -> Subquery:
    """A fact of the turn an event belongs to (its turn_started event's payload)."""
    return Subquery(Event.objects.filter(conversation_id=OuterRef("conversation_id"), sequence=OuterRef("turn_sequence"))
                    .values(fact=KT(f"payload__{name}"))[:1])


def _group_key(split: str):
    if split == "user":
        return F("conversation__owner_id")
    if split == "kind":
        return F("conversation__kind")
    if split == "provider":
        # The provider that answered the event's turn; run-level events: the conversation's choice.
        return Coalesce(_turn_fact("provider"), NullIf(F("conversation__provider"), Value("")), Value(""),
                        output_field=TextField())
    if split == "model":
        return Coalesce(NullIf(KT("payload__model"), Value("")), _turn_fact("model"), Value(""), output_field=TextField())
    return F("conversation__profile_id")


def _labels(split: str, keys: list[Any]) -> dict[Any, str]:
    if split == "profile":
        names = dict(AgentProfile.objects.filter(pk__in=[key for key in keys if key is not None]).values_list("pk", "name"))
        return {key: names.get(key, f"profile #{key} (deleted)") if key is not None else NO_PROFILE for key in keys}
    if split == "user":
        names = dict(get_user_model().objects.filter(pk__in=keys).values_list("pk", "username"))
        return {key: names.get(key, f"user #{key} (deleted)") for key in keys}
    if split == "kind":
        return {key: dict(Conversation.Kind.choices).get(key, key or UNKNOWN) for key in keys}
    if split == "provider":
        return {key: provider_label(key) if key else UNKNOWN for key in keys}
    return {key: key or UNKNOWN for key in keys}


@contextmanager
def _grouped_reads():
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # The planner's estimate for these grouped reads passes jit_above_cost, and compiling them took
            # ~100 ms of a ~200 ms query at 100,000 events (playground/bench/overview.py); they return a few rows.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        yield


def _bucket(value: datetime) -> datetime:
    return timezone.localtime(value) if timezone.is_aware(value) else value


def _add_calls(bucketed: QuerySet, cells, totals) -> None:
    turn_model = Event.objects.filter(conversation_id=OuterRef("conversation_id"), sequence=OuterRef("turn_sequence")).values(
        model=KT("payload__model"))[:1]
    groups = (bucketed.filter(type="model_response")
              .annotate(model_name=Coalesce(NullIf(KT("payload__model"), Value("")), Subquery(turn_model), Value(""),
                                            output_field=TextField()),
                        ttl=Coalesce(KT("payload__cache_ttl"), Value(""), output_field=TextField()))
              .values("bucket", "group_key", "model_name", "ttl")
              .annotate(calls=Count("id"), uncached=_token_sum("input"), output=_token_sum("output"),
                        write=_token_sum("cache_write"), read=_token_sum("cache_read"))
              .order_by())
    table = current_price_table()
    for group in groups:
        bucket = _bucket(group["bucket"])
        usage = Usage(uncached=group["uncached"], output=group["output"], cache_write=group["write"], cache_read=group["read"])
        cost = table.call_cost(usage, group["model_name"], group["ttl"])
        for cell in (cells[(bucket, group["group_key"])], totals[group["group_key"]]):
            cell.calls += group["calls"]
            cell.input_tokens += usage.input_total
            cell.output_tokens += usage.output
            cell.cache_read_tokens += usage.cache_read
            if cost is None:
                cell.unpriced.add(unpriced_name(group["model_name"]))
            else:
                cell.cost += cost


def _token_sum(name: str):
    return Coalesce(Sum(Cast(KT(f"payload__usage__{name}"), IntegerField())), 0)


def _duration():
    return Cast(KT("payload__duration_ms"), FloatField())


def _add_latency(bucketed: QuerySet, events: QuerySet, cells, totals) -> None:
    calls = bucketed.filter(type="model_response")
    if connection.vendor == "postgresql":
        for group in calls.values("bucket", "group_key").annotate(
                p50=PercentileCont(_duration(), 0.5), p95=PercentileCont(_duration(), 0.95)).order_by():
            cell = cells[(_bucket(group["bucket"]), group["group_key"])]
            cell.p50_ms, cell.p95_ms = group["p50"], group["p95"]
        for group in (events.filter(type="model_response")
                      .values("group_key").annotate(p50=PercentileCont(_duration(), 0.5), p95=PercentileCont(_duration(), 0.95))
                      .order_by()):
            totals[group["group_key"]].p50_ms, totals[group["group_key"]].p95_ms = group["p50"], group["p95"]
        return
    per_cell: dict[tuple[datetime, int | None], list[float]] = defaultdict(list)
    per_group: dict[int | None, list[float]] = defaultdict(list)
    for bucket, group_key, duration in calls.annotate(duration=_duration()).values_list("bucket", "group_key", "duration"):
        if duration is not None:
            per_cell[(_bucket(bucket), group_key)].append(duration)
            per_group[group_key].append(duration)
    for key, values in per_cell.items():
        cells[key].p50_ms, cells[key].p95_ms = percentile(values, 0.5), percentile(values, 0.95)
    for key, values in per_group.items():
        totals[key].p50_ms, totals[key].p95_ms = percentile(values, 0.5), percentile(values, 0.95)


def _add_counts(bucketed: QuerySet, cells, totals) -> None:
    counted = (bucketed.filter(Q(type="error") | Q(type="tool_result", payload__is_error=True)
                               | Q(type="turn_finished", payload__final=True))
               .values("bucket", "group_key", "type").annotate(n=Count("id")).order_by())
    for group in counted:
        for cell in (cells[(_bucket(group["bucket"]), group["group_key"])], totals[group["group_key"]]):
            if group["type"] == "error":
                cell.run_errors += group["n"]
            elif group["type"] == "tool_result":
                cell.tool_errors += group["n"]
            else:
                cell.runs += group["n"]
