"""Reads for the evaluation page: available toolsets and the chart of a run."""
from __future__ import annotations

import os
from dataclasses import dataclass

from playground.engine.catalog_io import BUNDLED_TOOLSETS, toolset_names, toolsets_dir
from playground.engine.search import quality
from playground.evaluation.learning_gate import refusals
from playground.evaluation.models import EvaluationRun
from playground.registry.models import LearnedRanking


def available_toolsets() -> list[str]:
    """Toolsets with labelled queries: the one that ships with the project (`demo`) first, then those
    of TOOLSETS_DIR in the order of `quality.TOOLSETS`, then any others."""
    present = toolset_names()
    bundled = [name for name in present if name in BUNDLED_TOOLSETS]
    ordered = [name for name in quality.TOOLSETS if name in present and name not in bundled]
    return bundled + ordered + [name for name in present if name not in bundled and name not in ordered]


@dataclass(frozen=True)
class ToolsetSource:
    """Where the page's toolsets come from, said on the page."""
    bundled: list[tuple[str, int, int]]  # (name, queries, tools) of the sets shipped with the project
    folder: str  # TOOLSETS_DIR or its default
    from_folder: list[str]  # the toolsets found there
    variable_set: bool  # TOOLSETS_DIR set in the environment


def toolset_source() -> ToolsetSource:
    bundled = []
    for name, folder in BUNDLED_TOOLSETS.items():
        try:
            queries = sum(1 for line in (folder / "queries.jsonl").open(encoding="utf-8") if line.strip())
            tools = sum(1 for line in (folder / "catalog.jsonl").open(encoding="utf-8") if line.strip())
        except OSError:
            continue
        bundled.append((name, queries, tools))
    root = toolsets_dir()
    return ToolsetSource(
        bundled=bundled, folder=str(root),
        from_folder=[name for name in available_toolsets() if name not in BUNDLED_TOOLSETS],
        variable_set=bool(os.environ.get("TOOLSETS_DIR")),
    )


def recent_runs(limit: int = 20):
    return EvaluationRun.objects.select_related("created_by")[:limit]


def result_rows(run: EvaluationRun) -> list[dict]:
    """The stored rows with template-friendly metric names (`recall@5` → `recall_5`)."""
    rows = []
    for row in (run.results or {}).get("rows") or []:
        metrics = row.get("metrics") or {}
        flat = {key.replace("@", "_"): value for key, value in metrics.items()}
        flat.setdefault("top_1", None)  # runs stored before top-1 was measured show a dash
        # The no-match gate's two rates as counts (quality.run_suite): labelled queries answered with
        # nothing (should be none) and nonsense queries answered "no match" (should be all).
        gate = {}
        if "empty" in metrics:
            gate["empty_count"] = round(float(metrics["empty"]) * int(row.get("queries") or 0))
        if "nonsense_no_match" in metrics:
            gate["nonsense_count"] = round(float(metrics["nonsense_no_match"]) * len(quality.NONSENSE_QUERIES))
            gate["nonsense_total"] = len(quality.NONSENSE_QUERIES)
        rows.append({**row, **flat, **gate})
    return rows


def default_comparison(run: EvaluationRun) -> dict | None:
    """Where the run's default backend is not the best, as stored by the run (`quality.default_gaps`):
    a plain sentence per gap and its example queries. None for runs without the default backend or
    stored before the comparison existed (their rows cannot be compared query by query any more)."""
    results = run.results or {}
    if "gaps" not in results:
        return None
    default = results.get("default_backend") or ""
    if not any(quality.usage_free_name(row.get("backend", "")) == default for row in results.get("rows") or []):
        return {"default": default, "present": False, "gaps": []}
    gaps = [{**gap, "sentence": quality.describe_gap(gap)} for gap in results["gaps"]]
    return {"default": default, "present": True, "gaps": gaps, "metric": quality.GAP_METRIC, "depth": quality.RANKED_DEPTH}


@dataclass
class Bar:
    label: str
    value: float
    x: float
    y: float
    width: float
    height: float
    metric: str


@dataclass
class Chart:
    width: int
    height: int
    bars: list[Bar]
    gridlines: list[tuple[float, str]]  # (y, label)
    groups: list[tuple[float, str, str, str]]  # (x centre, backend name, its settings as shown, the whole spec)
    two_line_labels: bool = False  # some backend has settings: every name sits on the first of two lines


CHART_METRICS = ("top@1", "recall@5", "recall@10")


def recall_chart(run: EvaluationRun, *, width: int = 640, height: int = 240) -> Chart | None:
    """Grouped bars (top-1, recall@5, recall@10) per backend, as numbers for an inline SVG template."""
    rows = (run.results or {}).get("rows") or []
    if not rows:
        return None
    tuned = any(":" in row["backend"] for row in rows)
    top, bottom, left = 10, 44 if tuned else 30, 40
    height += bottom - 30  # a second label line for backends with settings
    plot_h = height - top - bottom
    group_w = (width - left - 10) / len(rows)
    fits = max(4, int(group_w / 6))  # characters of the small settings line per group
    bar_w = min(36.0, (group_w - 16) / len(CHART_METRICS))
    bars: list[Bar] = []
    groups: list[tuple[float, str, str, str]] = []
    for g, row in enumerate(rows):
        x0 = left + g * group_w + (group_w - bar_w * len(CHART_METRICS)) / 2
        for m, metric in enumerate(CHART_METRICS):
            if metric not in row["metrics"]:  # a run stored before top-1 was measured: no bar, not a zero
                continue
            value = float(row["metrics"][metric])
            bar_h = value * plot_h
            shown_metric = "top-1" if metric == "top@1" else metric
            bars.append(Bar(label=f"{row['backend']} {shown_metric} {value:.3f}", value=value, x=x0 + m * bar_w, y=top + plot_h - bar_h, width=bar_w - 2, height=bar_h, metric=shown_metric.replace("@", "-")))
        name, _, options = row["backend"].partition(":")
        shown = options if len(options) <= fits else options[: fits - 1] + "…"
        groups.append((left + g * group_w + group_w / 2, name, shown, row["backend"]))
    gridlines = [(top + plot_h * (1 - v), f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return Chart(width=width, height=height, bars=bars, gridlines=gridlines, groups=groups, two_line_labels=tuned)


LEARNED_METRICS = (("top@1", "top-1"), ("mrr", "MRR@10"), ("recall@5", "R@5"), ("recall@10", "R@10"))


def _before_after(before: dict | None, after: dict | None) -> list[dict]:
    """Per metric: before, after and the change, for a template (none when not measured)."""
    if not before or not after:
        return []
    return [{"metric": label, "before": before[key], "after": after[key], "delta": after[key] - before[key]}
            for key, label in LEARNED_METRICS]


def learned_rankings_by_profile(profiles: list[tuple]) -> list[dict]:
    """Per (profile, labelled rows): its learned-ranking versions, newest first, with their figures
    and why one may not be switched on (the service's own gate, `learning.refusals`)."""
    rows = LearnedRanking.objects.filter(profile__in=[p for p, _ in profiles]).defer("artefact").select_related("created_by")
    by_profile: dict[int, list[LearnedRanking]] = {}
    for row in rows:
        by_profile.setdefault(row.profile_id, []).append(row)
    answer = []
    for profile, labelled in profiles:
        versions = []
        for row in by_profile.get(profile.pk, []):
            metrics = row.metrics or {}
            team = metrics.get("team") or {}
            versions.append({
                "row": row, "team": _before_after(team.get("before"), team.get("after")), "train": team.get("train"),
                "test": team.get("test"),
                "shared": [{"toolset": s["toolset"], "queries": s["queries"], "figures": _before_after(s["before"], s["after"])}
                           for s in metrics.get("shared") or []],
                "refusals": refusals(metrics) if row.status == LearnedRanking.Status.READY else [],
                "folds": _before_after((metrics.get("cross_validation") or {}).get("base"),
                                       (metrics.get("cross_validation") or {}).get("learned")),
                "folds_queries": (metrics.get("cross_validation") or {}).get("queries"),
            })
        answer.append({"profile": profile, "labelled": labelled, "versions": versions})
    return answer
