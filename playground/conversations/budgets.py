"""Budgets per user and per profile: what they have spent this day or month, and the refusal at the limit.

Spent is read from the saved events with the overview's own aggregation (`overview.period_usage`), so a
budget and the overview never disagree on a dollar: the same price table, the same token sums. A budget
is checked when new work would start (a new conversation, a new message, a task run); a run already
going is never cut, so spending can pass a limit by what the runs in flight still use.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from playground.conversations.models import UsageBudget
from playground.conversations.overview import Cell, UsageFilters, period_totals, period_usage
from playground.conversations.templatetags.costs import usd

ALERT_CACHE_KEY = "usage-budget-alerts"
ALERT_CACHE_SECONDS = 30  # the navigation's alert for admins: one read of every budget per half minute and process


@dataclass(frozen=True)
class BudgetStatus:
    budget: UsageBudget
    spent: Decimal
    since: datetime

    @property
    def reached(self) -> bool:
        return self.spent >= self.budget.limit

    @property
    def share(self) -> float:
        return float(self.spent / self.budget.limit)

    @property
    def scope_label(self) -> str:
        if self.budget.user_id is not None:
            return f"user {self.budget.user.get_username()}"
        return f"profile {self.budget.profile.name}"

    def amount(self, value: Decimal) -> str:
        return usd(value) if self.budget.metric == UsageBudget.Metric.DOLLARS else f"{int(value):,} tokens"

    @property
    def spent_label(self) -> str:
        return self.amount(self.spent)

    @property
    def limit_label(self) -> str:
        return self.amount(self.budget.limit)

    @property
    def refusal(self) -> str:
        period = "today" if self.budget.period == UsageBudget.Period.DAY else "this month"
        again = "tomorrow" if self.budget.period == UsageBudget.Period.DAY else "next month"
        adjective = "daily" if self.budget.period == UsageBudget.Period.DAY else "monthly"
        return (f"The {adjective} budget of {self.scope_label} is reached: "
                f"{self.amount(self.spent)} spent {period} of {self.amount(self.budget.limit)}. New conversations and "
                f"messages start again {again}, or when an admin raises the budget on the usage overview.")


def period_start(period: str, now: datetime) -> datetime:
    local = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return local.replace(day=1) if period == UsageBudget.Period.MONTH else local


def status_of(budget: UsageBudget, now: datetime | None = None) -> BudgetStatus:
    now = now or timezone.now()
    since = period_start(budget.period, now)
    cell = period_usage(since, now, UsageFilters(user_id=budget.user_id, profile_id=budget.profile_id))
    return _status(budget, cell, since)


def _status(budget: UsageBudget, cell: Cell, since: datetime) -> BudgetStatus:
    spent = Decimal(str(round(cell.cost, 6))) if budget.metric == UsageBudget.Metric.DOLLARS else Decimal(cell.tokens)
    return BudgetStatus(budget=budget, spent=spent, since=since)


def statuses(now: datetime | None = None) -> list[BudgetStatus]:
    """Every budget's status with one grouped read per period and scope (at most four), not one per budget."""
    now = now or timezone.now()
    budgets = list(UsageBudget.objects.select_related("user", "profile"))
    spent: dict[tuple[str, str], dict] = {}
    for period, scope in {(b.period, "user" if b.user_id is not None else "profile") for b in budgets}:
        spent[(period, scope)] = period_totals(period_start(period, now), now, UsageFilters(), split=scope)
    out = []
    for budget in budgets:
        scope, key = ("user", budget.user_id) if budget.user_id is not None else ("profile", budget.profile_id)
        out.append(_status(budget, spent[(budget.period, scope)].get(key, Cell()), period_start(budget.period, now)))
    return out


def refusal(owner, profile) -> str:
    """Why new work for `owner` under `profile` may not start (a budget of either is reached), or ""."""
    scope = Q(pk__in=[])
    if getattr(owner, "pk", None) is not None:
        scope |= Q(user_id=owner.pk)
    if profile is not None:
        scope |= Q(profile_id=profile.pk)
    for budget in UsageBudget.objects.filter(scope).select_related("user", "profile"):
        status = status_of(budget)
        if status.reached:
            return status.refusal
    return ""


def reached_count() -> int:
    """How many budgets are at their limit, for the admins' alert in the navigation (cached briefly)."""
    count = cache.get(ALERT_CACHE_KEY)
    if count is None:
        count = sum(1 for status in statuses() if status.reached) if UsageBudget.objects.exists() else 0
        cache.set(ALERT_CACHE_KEY, count, ALERT_CACHE_SECONDS)
    return count


def forget_alerts() -> None:
    cache.delete(ALERT_CACHE_KEY)
