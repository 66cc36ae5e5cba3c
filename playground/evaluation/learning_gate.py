"""The gate of a learned ranking: a version goes on only when it wins on the team's test split and
loses nothing on any shared test split (its own module: the service enforces it, the page shows it)."""
from __future__ import annotations

from typing import Any

from playground.engine.search.learning_eval import METRICS

EPSILON = 1e-9


class SwitchRefused(ValueError):
    """Why a version may not be switched on, for the page."""


def refusals(metrics: dict[str, Any]) -> list[str]:
    """Why a version with these figures may not be switched on ([] = it may)."""
    reasons = []
    if not metrics.get("learner_on"):
        reasons.append(f"the learner switched itself off: {metrics.get('reason') or 'it did not beat the base ranking'}")
    team = metrics.get("team") or {}
    before, after = team.get("before"), team.get("after")
    if not before or not after:
        reasons.append("the team's labelled set has no request in its test split to measure it on")
    else:
        worse = [m for m in METRICS if after[m] < before[m] - EPSILON]
        gains = after["recall@5"] > before["recall@5"] + EPSILON or after["top@1"] > before["top@1"] + EPSILON
        if worse:
            reasons.append("it loses on the team's test split: " + ", ".join(f"{m} {before[m]:.3f} → {after[m]:.3f}" for m in worse))
        elif not gains:
            reasons.append("it does not win on the team's test split (recall@5 and top-1 unchanged)")
    for row in metrics.get("shared") or []:
        worse = [m for m in METRICS if row["after"][m] < row["before"][m] - EPSILON]
        if worse:
            reasons.append(f"it loses on the shared toolset {row['toolset']}: "
                           + ", ".join(f"{m} {row['before'][m]:.3f} → {row['after'][m]:.3f}" for m in worse))
    return reasons
