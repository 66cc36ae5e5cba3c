"""In-domain learning measured: train a learned ranking on a toolset's dev split, search its test split.

`eval --learn-from dev` runs this for each shared toolset (or a profile's own set, in the web app):
the test split zero-shot ("before"), with the dev split as the BM25 side's usage log only
("+usage", what `--usage-from dev` measures), and with the learned ranking trained on the dev
split ("after", learned.py; it includes the usage log). The learner's own cross-validation on the
dev split (and so whether it switched itself on) is reported beside them. These are in-domain
figures — the catalog's own past requests were seen — never the zero-shot headline.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.engine.catalog_io import LabelledQuery
from playground.engine.search.base import SearchBackend
from playground.engine.search.learned import LearnedBackend, LearnedRanking, train_ranking
from playground.engine.search.quality import RunResult, evaluate_backend, load_toolset, select_queries, usage_from_queries
from playground.engine.tools import ToolCatalog

METRICS: tuple[str, ...] = ("top@1", "mrr", "recall@5", "recall@10")
LEARN_SOURCES: tuple[str, ...] = ("none", "dev")

Progress = Callable[[float, str], None]


def figures(result: RunResult) -> dict[str, float]:
    return {metric: result.metrics[metric] for metric in METRICS}


@dataclass
class LearningResult:
    toolset: str
    backend: str
    style: str
    train_queries: int
    test_queries: int
    before: dict[str, float]
    usage_only: dict[str, float]
    after: dict[str, float]
    enabled: bool
    cross_validation: dict[str, Any] | None = None
    reason: str = ""
    ranking: LearnedRanking | None = field(default=None, repr=False)

    @property
    def delta(self) -> dict[str, float]:
        return {metric: round(self.after[metric] - self.before[metric], 4) for metric in METRICS}

    def to_dict(self) -> dict[str, Any]:
        return {"toolset": self.toolset, "backend": self.backend, "style": self.style, "train_queries": self.train_queries,
                "test_queries": self.test_queries, "before": self.before, "usage_only": self.usage_only, "after": self.after,
                "delta": self.delta, "enabled": self.enabled, "reason": self.reason, "cross_validation": self.cross_validation}


def learn_and_measure(backend: SearchBackend, catalog: ToolCatalog, train: Sequence[LabelledQuery], test: Sequence[LabelledQuery], *,
                      toolset: str = "", style: str = "natural", progress: Progress | None = None,
                      ranking: LearnedRanking | None = None) -> LearningResult:
    """Train on `train` (unless a `ranking` is given), then score `test` before, with the usage log, and after."""
    if ranking is None:
        ranking = train_ranking(backend, catalog, train, progress=progress)
    before = evaluate_backend(backend, catalog, test, style=style, toolset=toolset, split="test")
    usage_only = evaluate_backend(backend, catalog, test, style=style, toolset=toolset, split="test",
                                  usage=usage_from_queries(train, style)) if train else before
    after = evaluate_backend(LearnedBackend(backend, ranking), catalog, test, style=style, toolset=toolset, split="test")
    cv = ranking.cross_validation
    return LearningResult(toolset=toolset, backend=backend.name, style=style, train_queries=len(train), test_queries=len(test),
                          before=figures(before), usage_only=figures(usage_only), after=figures(after), enabled=ranking.enabled,
                          cross_validation=cv.to_dict() if cv else None, reason=ranking.reason, ranking=ranking)


def run_learning(toolsets: Sequence[str], backend: SearchBackend, *, style: str = "natural", limit: int | None = None,
                 root: Path | None = None, progress: Progress | None = None) -> list[LearningResult]:
    """For each toolset: train on its whole dev split, measure its test split (`limit`: an even sample of it)."""
    results = []
    for n, name in enumerate(toolsets):
        catalog, queries = load_toolset(name, root)
        train, test = select_queries(queries, "dev"), select_queries(queries, "test", limit)
        if progress:
            progress(n / len(toolsets), f"{name}: learning from {len(train)} dev requests, measuring {len(test)} test requests")
        results.append(learn_and_measure(backend, catalog, train, test, toolset=name, style=style))
    return results


def format_learning(results: Sequence[LearningResult]) -> str:
    lines = ["| toolset | train / test | learner | before: top-1 / MRR@10 / R@5 / R@10 | +usage field | after (learned) | Δ R@5 | Δ top-1 |",
             "|---|---|---|---|---|---|---:|---:|"]
    for r in results:
        def row(values: dict[str, float]) -> str:
            return " / ".join(f"{values[m]:.3f}" for m in METRICS)
        lines.append(f"| {r.toolset} | {r.train_queries} / {r.test_queries} | {'on' if r.enabled else 'off'} | {row(r.before)} | "
                     f"{row(r.usage_only)} | {row(r.after)} | {r.delta['recall@5']:+.3f} | {r.delta['top@1']:+.3f} |")
    return "\n".join(lines)
