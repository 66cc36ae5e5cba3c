"""Retrieval quality of a search backend over a labelled query set (../shared/toolsets format).

Each query ranks the whole catalog; with `top` = the first k names, a gold tool is hit when it or
one of its `equivalent_names` is in `top`. Per query: top-1 (the first name is a gold tool),
recall@k (hit gold / gold), full hit@k (all gold hit), reciprocal rank of the first hit within the top 10 (MRR@10). Means over queries, plus
per-query search latency (the index is built before timing).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from playground.engine.catalog_io import LabelledQuery
from playground.engine.search.base import SearchBackend
from playground.engine.tools import ToolCatalog

RANKED_DEPTH = 10  # recall@10 and MRR@10 look this deep


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


@dataclass(frozen=True)
class QueryOutcome:
    id: str
    ranked: tuple[str, ...]  # the top RANKED_DEPTH names
    recall_at_k: float
    recall_at_10: float
    full_hit_at_k: bool
    top_1: bool
    reciprocal_rank: float
    latency_ms: float


def hits(query: LabelledQuery, top: Sequence[str]) -> int:
    shown = set(top)
    return sum(1 for gold in query.expected_tool_names if query.accepted_names(gold) & shown)


def first_hit_rank(query: LabelledQuery, ranked: Sequence[str]) -> int | None:
    """The 1-based position of the first gold tool (or an accepted alternative) in `ranked`, else None."""
    accepted = set().union(*(query.accepted_names(g) for g in query.expected_tool_names))
    return next((position for position, name in enumerate(ranked, start=1) if name in accepted), None)


def reciprocal_rank(query: LabelledQuery, ranked: Sequence[str]) -> float:
    position = first_hit_rank(query, ranked)
    return 1.0 / position if position else 0.0


def score_query(query: LabelledQuery, ranked: Sequence[str], k: int, latency_ms: float = 0.0) -> QueryOutcome:
    gold = len(query.expected_tool_names)
    hit_k = hits(query, ranked[:k])
    return QueryOutcome(
        id=query.id,
        ranked=tuple(ranked[:RANKED_DEPTH]),
        recall_at_k=hit_k / gold,
        recall_at_10=hits(query, ranked[:RANKED_DEPTH]) / gold,
        full_hit_at_k=hit_k == gold,
        top_1=first_hit_rank(query, ranked[:1]) == 1,
        reciprocal_rank=reciprocal_rank(query, ranked[:RANKED_DEPTH]),
        latency_ms=latency_ms,
    )


@dataclass
class EvalReport:
    backend: str
    tools: int
    k: int
    build_s: float
    outcomes: list[QueryOutcome] = field(default_factory=list)

    def _mean(self, attribute: str) -> float:
        values = [float(getattr(o, attribute)) for o in self.outcomes]
        return sum(values) / len(values) if values else 0.0

    @property
    def recall_at_k(self) -> float:
        return self._mean("recall_at_k")

    @property
    def recall_at_10(self) -> float:
        return self._mean("recall_at_10")

    @property
    def full_hit_at_k(self) -> float:
        return self._mean("full_hit_at_k")

    @property
    def top_1(self) -> float:
        return self._mean("top_1")

    @property
    def mrr(self) -> float:
        return self._mean("reciprocal_rank")

    @property
    def p50_ms(self) -> float:
        return percentile([o.latency_ms for o in self.outcomes], 50)

    @property
    def p95_ms(self) -> float:
        return percentile([o.latency_ms for o in self.outcomes], 95)

    def metrics(self) -> dict[str, Any]:
        """The measures as measured: rounded once, where they are shown (the command line's table
        prints three places; `to_dict`, the JSON, four), never rounded here and again there."""
        return {
            "backend": self.backend,
            "tools": self.tools,
            "query_count": len(self.outcomes),
            "k": self.k,
            "recall_at_k": self.recall_at_k,
            "recall_at_10": self.recall_at_10,
            "full_hit_at_k": self.full_hit_at_k,
            "top_1": self.top_1,
            "mrr": self.mrr,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "build_s": self.build_s,
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON: the measures to four places (times to three), each rounded once from the measure."""
        shown = {key: round(value, 3 if key in ("p50_ms", "p95_ms", "build_s") else 4) if isinstance(value, float) else value
                 for key, value in self.metrics().items()}
        return {**shown, "queries": [{"id": o.id, "ranked": list(o.ranked)} for o in self.outcomes]}


def evaluate(catalog: ToolCatalog, queries: Sequence[LabelledQuery], backend: SearchBackend, k: int = 5) -> EvalReport:
    if k < 1:
        raise ValueError("k must be at least 1")
    started = time.perf_counter()
    backend.index_for(catalog)
    report = EvalReport(backend=backend.name, tools=len(catalog), k=k, build_s=time.perf_counter() - started)
    depth = max(k, RANKED_DEPTH)
    for query in queries:
        started = time.perf_counter()
        result = backend.search(query.query, catalog, max_results=depth)
        latency_ms = (time.perf_counter() - started) * 1000
        report.outcomes.append(score_query(query, result.matches, k, latency_ms))
    return report
