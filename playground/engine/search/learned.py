"""A learned ranking: what a catalog's own labelled requests teach, laid over a backend's ranking.

Zero-shot search knows only the tools' text. A team that uses one catalog every day also knows
which tool each of its past requests wanted (the profile's labelled set, or a toolset's dev
split). `train_ranking` learns from those examples, in-domain only, and `LearnedBackend` re-ranks
the base backend's answer with what it learned:

- **nearest past request**: the cosine of the request to the closest past request that led to the
  tool (usage vectors: a tool is also where its past requests are), and to their centroid;
- **query adapter**: a linear map of request vectors towards the vectors of the tools they wanted
  (ridge regression pulled towards the identity; numpy least squares, no torch);
- **co-usage**: how often the tool was wanted together with one of the base ranking's first tools
  (multi-tool requests);
- the base backend's own score and rank, and how often the tool was wanted at all.
The past requests also feed the BM25 side's `usage` field (usage.py), as a log does.

The features are combined by a linear model fitted (ridge, pointwise) on out-of-fold features:
each training request is ranked with the memory and usage log of the other folds only, so a
request never finds itself. The same folds say whether the model beats the base ranking (recall@5,
top-1, MRR@10): when it does not, the ranking is trained but `enabled` is false and re-ranks
nothing. A request that names a tool (mentions.py) is never moved, nor is a `select:`, exact-name
or prefix answer. No rule here names a toolset, server or tool.
"""
from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from playground.engine.catalog_io import LabelledQuery
from playground.engine.evaluate import RANKED_DEPTH, first_hit_rank, hits, reciprocal_rank
from playground.engine.search.base import ScoredTool, SearchBackend, TermContribution, ToolSearchResult
from playground.engine.search.mentions import named_tools
from playground.engine.search.query import QueryReading
from playground.engine.search.semantic import dense_side
from playground.engine.search.usage import UsageLog
from playground.engine.tools import ToolCatalog

FEATURES: tuple[str, ...] = ("base", "base_rank", "tool_cosine", "nearest_past", "nearest_margin", "centroid", "adapter",
                             "co_usage", "popularity", "has_past")
LEARNED_RULE = "learned from the team's labelled requests"
CANDIDATES = 20  # the base ranking's first tools the learned ranking may re-order
PAST_NEIGHBOURS = 5  # the tools of the closest past requests join the candidates
FOLDS = 5
MIN_EXAMPLES = 10  # fewer labelled requests teach nothing measurable
RIDGE = 1.0  # the linear model's regularisation (features are on 0–1 scales)
ADAPTER_RIDGE = 4.0  # the adapter's pull towards the identity, per example
FORMAT = 1

Progress = Callable[[float, str], None]


class LearningUnavailable(ValueError):
    """The backend cannot learn (no dense side) or the examples are too few; the message says which."""


@dataclass
class CrossValidation:
    """Out-of-fold figures on the training examples: the base ranking (with the other folds as
    its usage log) and the learned one."""

    queries: int
    base: dict[str, float]
    learned: dict[str, float]

    @property
    def wins(self) -> bool:
        """Better recall@5 or top-1 and worse at none of top-1, MRR@10, recall@5, recall@10 (the gate's figures)."""
        b, l_ = self.base, self.learned
        not_worse = all(l_[m] >= b[m] - 1e-9 for m in ("recall@5", "top@1", "mrr", "recall@10"))
        return not_worse and (l_["recall@5"] > b["recall@5"] + 1e-9 or l_["top@1"] > b["top@1"] + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "base": self.base, "learned": self.learned, "wins": self.wins}


@dataclass
class LearnedRanking:
    """The trained artefact: past requests' vectors and tools, the adapter, co-usage, the weights."""

    encoder_id: str
    memory: np.ndarray  # (m, dim) unit rows: the past requests' vectors
    memory_tools: list[list[str]]  # per row, the tools that request wanted
    adapter: np.ndarray  # (dim, dim)
    co_usage: dict[str, dict[str, float]]  # tool → tool → share of the first's requests that also wanted the second
    weights: np.ndarray  # (len(FEATURES) + 1,): the intercept last
    enabled: bool
    pairs: list[tuple[str, str]]  # (request, tool): the usage log the BM25 side reads
    cross_validation: CrossValidation | None = None
    reason: str = ""  # why it is not enabled
    _rows_of: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _centroids: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._rows_of = {}
        for row, tools in enumerate(self.memory_tools):
            for tool in tools:
                self._rows_of.setdefault(tool, []).append(row)
        self._centroids = {tool: _unit(self.memory[rows].mean(axis=0)) for tool, rows in self._rows_of.items()}
        self._most = max((len(rows) for rows in self._rows_of.values()), default=1)
        self.usage = UsageLog.from_pairs(self.pairs)

    @property
    def examples(self) -> int:
        return len(self.memory_tools)

    # -- features ----------------------------------------------------------------------------------
    def candidates(self, scored: Sequence[ScoredTool], query_vector: np.ndarray, required: bool,
                   searchable: Container[str]) -> list[str]:
        """The base ranking's first tools, and the searchable tools of the closest past requests
        (not with a +term filter: only tools the base kept pass it)."""
        names = [s.name for s in scored[:CANDIDATES]]
        if not required and len(self.memory):
            closest = np.argsort(-(self.memory @ query_vector), kind="stable")[:PAST_NEIGHBOURS]
            for row in closest:
                names.extend(tool for tool in self.memory_tools[int(row)] if tool in searchable)
        return list(dict.fromkeys(names))

    def features(self, names: Sequence[str], scored: Sequence[ScoredTool], query_vector: np.ndarray,
                 tool_vectors: dict[str, np.ndarray]) -> np.ndarray:
        base = {s.name: (s.score, rank) for rank, s in enumerate(scored[:CANDIDATES])}
        top_score = max((s.score for s in scored[:CANDIDATES]), default=0.0) or 1.0
        past = self.memory @ query_vector if len(self.memory) else np.zeros(0)
        nearest = float(past.max()) if len(past) else 0.0
        adapted = _unit(query_vector @ self.adapter)
        leaders = [s.name for s in scored[:3]]
        rows = np.zeros((len(names), len(FEATURES)), dtype=np.float64)
        for i, name in enumerate(names):
            score, rank = base.get(name, (0.0, None))
            own_rows = self._rows_of.get(name)
            vector = tool_vectors.get(name)
            own_nearest = float(past[own_rows].max()) if own_rows else 0.0
            rows[i] = (
                max(score, 0.0) / top_score,
                0.0 if rank is None else 1.0 / (rank + 1),
                float(query_vector @ vector) if vector is not None else 0.0,
                own_nearest,
                1.0 + max(own_nearest - nearest, -1.0) if own_rows else 0.0,
                float(self._centroids[name] @ query_vector) if own_rows else 0.0,
                float(adapted @ vector) if vector is not None else 0.0,
                max((self.co_usage.get(leader, {}).get(name, 0.0) for leader in leaders if leader != name), default=0.0),
                np.log1p(len(own_rows)) / np.log1p(self._most) if own_rows else 0.0,
                1.0 if own_rows else 0.0,
            )
        return rows

    def rerank(self, scored: Sequence[ScoredTool], query_vector: np.ndarray, tool_vectors: dict[str, np.ndarray],
               *, required: bool = False) -> list[ScoredTool]:
        """`scored` re-ordered by the learned model; each moved tool's breakdown gains the learned points."""
        if not self.enabled or not scored:
            return list(scored)
        names = self.candidates(scored, query_vector, required, tool_vectors)
        values = self.features(names, scored, query_vector, tool_vectors) @ self.weights[:-1] + self.weights[-1]
        by_name = {s.name: s for s in scored}
        order = sorted(range(len(names)), key=lambda i: -values[i])  # stable: ties keep the base order
        ranked: list[ScoredTool] = []
        for i in order:
            own = by_name.get(names[i])
            before = own.score if own is not None else 0.0
            total = round(float(values[i]), 6)
            learned = TermContribution(term="", rule=LEARNED_RULE, points=total - before, field="learned",
                                       detail=f"from {self.examples} labelled requests")
            ranked.append(ScoredTool(names[i], total, [*(own.breakdown if own is not None else []), learned]))
        kept = set(names)
        return ranked + [s for s in scored if s.name not in kept]

    # -- storage -----------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        meta = {"format": FORMAT, "encoder_id": self.encoder_id, "memory_tools": self.memory_tools, "co_usage": self.co_usage,
                "enabled": self.enabled, "pairs": self.pairs, "reason": self.reason,
                "cross_validation": self.cross_validation.to_dict() if self.cross_validation else None}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, memory=self.memory.astype(np.float32), adapter=self.adapter.astype(np.float32),
                            weights=self.weights, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> LearnedRanking:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            meta = json.loads(arrays["meta"].tobytes().decode())
            if meta.get("format") != FORMAT:
                raise ValueError(f"a learned ranking of format {meta.get('format')!r}; this version reads {FORMAT}")
            cv = meta.get("cross_validation")
            return cls(encoder_id=meta["encoder_id"], memory=arrays["memory"].astype(np.float32), memory_tools=meta["memory_tools"],
                       adapter=arrays["adapter"].astype(np.float32), co_usage=meta["co_usage"], weights=arrays["weights"],
                       enabled=meta["enabled"], pairs=[tuple(p) for p in meta["pairs"]], reason=meta.get("reason", ""),
                       cross_validation=CrossValidation(cv["queries"], cv["base"], cv["learned"]) if cv else None)


class LearnedBackend(SearchBackend):
    """The base backend's answer, re-ranked by a `LearnedRanking` for keyword requests that name no tool."""

    def __init__(self, base: SearchBackend, ranking: LearnedRanking):
        super().__init__()
        dense = dense_side(base)
        if dense is None:
            raise LearningUnavailable(f"backend {base.name!r} has no dense side: a learned ranking needs sentence embeddings")
        if dense.encoder.model_id != ranking.encoder_id:
            raise LearningUnavailable(f"the ranking was learned with encoder {ranking.encoder_id}, the backend uses {dense.encoder.model_id}")
        self.base, self.ranking, self.dense = base, ranking, dense
        self.name = f"{base.name} +learned"
        self.label = f"{base.label} + learned ranking"
        self.reads_usage = base.reads_usage
        self._merged: tuple[str, UsageLog] | None = None

    def build_index(self, catalog: ToolCatalog, **kwargs: Any) -> Any:
        return self.base.build_index(catalog, **kwargs)

    def rank(self, reading: QueryReading, index: Any, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        """The base backend's ranking (`search` re-ranks it; this is what a caller of `rank` alone gets)."""
        return self.base.rank(reading, index, catalog, max_results)

    def index_for(self, catalog: ToolCatalog, usage: UsageLog | None = None) -> Any:
        return self.base.index_for(catalog, self._usage(usage))

    def _usage(self, usage: UsageLog | None) -> UsageLog | None:
        """The deployment's log with the ranking's examples added (kept for the last log seen)."""
        if not usage:
            return self.ranking.usage or None
        key = usage.fingerprint
        if self._merged is None or self._merged[0] != key:
            pairs = [(q, tool) for tool, queries in usage.queries.items() for q in queries]
            self._merged = (key, UsageLog.from_pairs([*self.ranking.pairs, *pairs]))
        return self._merged[1]

    def search(self, query: str, catalog: ToolCatalog, *, max_results: int = 5, pending_mcp_servers: Sequence[str] = (),
               usage: UsageLog | None = None) -> ToolSearchResult:
        max_results = max(1, int(max_results))
        usage = self._usage(usage)
        result = self.base.search(query, catalog, max_results=max_results, pending_mcp_servers=pending_mcp_servers, usage=usage)
        result.backend = self.name
        # Only over the backend's own index: an answer from a previous index or the keyword fallback
        # (indexed.py, while vectors are built) is left alone — re-ranking it would encode the catalog here.
        if result.reading.kind == "keyword" and result.scored and self.ranking.enabled and not result.index_state \
                and not named_tools(query, catalog, result.reading.required):
            scored = deeper(self.base, query, catalog, result, usage)
            vectors = tool_vectors(self.dense, catalog)
            result.scored = self.ranking.rerank(scored, self.dense.embed_query(query), vectors,
                                                required=bool(result.reading.required))[:max_results]
            result.matches = [s.name for s in result.scored]
        return result


def deeper(base: SearchBackend, query: str, catalog: ToolCatalog, shown: ToolSearchResult, usage: UsageLog | None) -> list[ScoredTool]:
    """The candidates: the answer as the base backend gave it (its first tools can depend on how many
    were asked for), then the rest of its first CANDIDATES."""
    if len(shown.scored) >= CANDIDATES:
        return list(shown.scored)
    more = base.search(query, catalog, max_results=CANDIDATES, usage=usage).scored
    names = {s.name for s in shown.scored}
    return [*shown.scored, *(s for s in more if s.name not in names)]


def tool_vectors(dense: SearchBackend, catalog: ToolCatalog) -> dict[str, np.ndarray]:
    """The deferred tools' vectors by name, as the dense side indexed them (kept with the catalog)."""
    def build() -> dict[str, np.ndarray]:
        index = dense.index_for(catalog)
        return {tool.name: index.vectors[i] for i, tool in enumerate(index.tools)}
    return catalog.kept(("learned tool vectors", dense.encoder.model_id), build)


# -- training --------------------------------------------------------------------------------------
def fold_of(query: LabelledQuery) -> int:
    return int(hashlib.sha1(("fold:" + query.id).encode()).hexdigest()[:8], 16) % FOLDS


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def fit_adapter(queries: np.ndarray, targets: np.ndarray, strength: float = ADAPTER_RIDGE) -> np.ndarray:
    """W minimising |QW − T|² + λ|W − I|² (λ = strength × examples): W = I + (QᵀQ + λI)⁻¹ Qᵀ(T − Q)."""
    dim = queries.shape[1]
    lam = strength * max(1, len(queries)) ** 0.5
    gram = queries.T @ queries + lam * np.eye(dim)
    return np.eye(dim) + np.linalg.solve(gram, queries.T @ (targets - queries))


def co_usage_of(tool_sets: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    counts: dict[str, int] = {}
    together: dict[str, dict[str, int]] = {}
    for tools in tool_sets:
        for tool in set(tools):
            counts[tool] = counts.get(tool, 0) + 1
            for other in set(tools) - {tool}:
                together.setdefault(tool, {})[other] = together.setdefault(tool, {}).get(other, 0) + 1
    return {tool: {other: n / counts[tool] for other, n in row.items()} for tool, row in together.items()}


def _fit_weights(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Pairwise logistic regression (RankNet-style, L2): within each request, a wanted tool should
    score above each candidate that was not wanted. A few Newton steps (the features are few)."""
    diffs = []
    for group in np.unique(groups):
        inside = groups == group
        positive, negative = x[inside & (y > 0)], x[inside & (y <= 0)]
        if len(positive) and len(negative):
            diffs.append((positive[:, None, :] - negative[None, :, :]).reshape(-1, x.shape[1]))
    weights = np.zeros(x.shape[1] + 1)
    if not diffs:
        return weights
    d = np.vstack(diffs)
    w = np.zeros(x.shape[1])
    w[list(FEATURES).index("base_rank")] = 1.0  # start from the base ranking's order
    for _ in range(25):
        p = 1.0 / (1.0 + np.exp(-np.clip(d @ w, -30, 30)))
        gradient = d.T @ (p - 1.0) + RIDGE * (w - _prior())
        hessian = (d * (p * (1 - p))[:, None]).T @ d + RIDGE * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-6:
            break
    weights[:-1] = w
    return weights


def _prior() -> np.ndarray:
    """Where the regularisation pulls: the base ranking's order alone."""
    prior = np.zeros(len(FEATURES))
    prior[list(FEATURES).index("base_rank")] = 1.0
    return prior


def _scores(query: LabelledQuery, ranked: Sequence[str]) -> dict[str, float]:
    gold = len(query.expected_tool_names)
    return {"recall@5": hits(query, ranked[:5]) / gold, "recall@10": hits(query, ranked[:RANKED_DEPTH]) / gold,
            "top@1": float(first_hit_rank(query, ranked[:1]) == 1), "mrr": reciprocal_rank(query, ranked[:RANKED_DEPTH])}


def _mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: round(sum(r[key] for r in rows) / max(1, len(rows)), 4) for key in ("top@1", "mrr", "recall@5", "recall@10")}


def _ranking(encoder_id: str, examples: Sequence[LabelledQuery], vectors: np.ndarray, tool_vectors_: dict[str, np.ndarray],
             weights: np.ndarray | None = None, enabled: bool = True) -> LearnedRanking:
    tool_sets = [list(q.expected_tool_names) for q in examples]
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    targets = np.array([_unit(np.mean([tool_vectors_[t] for t in tools if t in tool_vectors_] or [np.zeros(dim)], axis=0))
                        for tools in tool_sets]) if len(examples) else np.zeros((0, dim))
    adapter = fit_adapter(vectors, targets) if len(examples) else np.eye(dim)
    return LearnedRanking(encoder_id=encoder_id, memory=vectors, memory_tools=tool_sets, adapter=adapter,
                          co_usage=co_usage_of(tool_sets),
                          weights=weights if weights is not None else np.zeros(len(FEATURES) + 1), enabled=enabled,
                          pairs=[(q.query, tool) for q in examples for tool in q.expected_tool_names])


def train_ranking(backend: SearchBackend, catalog: ToolCatalog, examples: Sequence[LabelledQuery], *,
                  progress: Progress | None = None) -> LearnedRanking:
    """Learn from `examples` (requests and the tools they wanted) over `catalog`; see the module doc."""
    dense = dense_side(backend)
    if dense is None:
        raise LearningUnavailable(f"backend {backend.name!r} has no dense side: a learned ranking needs sentence embeddings")
    examples = [q for q in examples if q.query.strip() and any(t in catalog for t in q.expected_tool_names)]
    encoder_id = dense.encoder.model_id
    vectors_by_tool = tool_vectors(dense, catalog)
    if not examples:
        raise LearningUnavailable("no labelled request names a tool of this catalog")
    dense.embed_query.prefetch([q.query for q in examples])
    vectors = np.array([dense.embed_query(q.query) for q in examples], dtype=np.float32)
    if len(examples) < MIN_EXAMPLES:
        ranking = _ranking(encoder_id, examples, vectors, vectors_by_tool, enabled=False)
        ranking.reason = f"{len(examples)} labelled requests; at least {MIN_EXAMPLES} are needed to learn and measure"
        return ranking

    folds = np.array([fold_of(q) for q in examples])
    rows_x: list[np.ndarray] = []
    rows_y: list[np.ndarray] = []
    rows_fold: list[int] = []
    rows_group: list[int] = []
    per_query: list[tuple[int, LabelledQuery, list[str], np.ndarray, list[str]]] = []  # fold, query, candidates, rows, base order
    for fold in range(FOLDS):
        inside = folds == fold
        if not inside.any():
            continue
        others = [q for q, f in zip(examples, folds) if f != fold]
        partial = _ranking(encoder_id, others, vectors[~inside], vectors_by_tool)
        for q, vector in zip([q for q, f in zip(examples, folds) if f == fold], vectors[inside]):
            result = backend.search(q.query, catalog, max_results=RANKED_DEPTH, usage=partial.usage or None)
            base_order = list(result.matches)
            if result.reading.kind != "keyword" or not result.scored or named_tools(q.query, catalog, result.reading.required):
                per_query.append((fold, q, [], np.zeros((0, len(FEATURES))), base_order))
                continue
            scored = deeper(backend, q.query, catalog, result, partial.usage or None)
            names = partial.candidates(scored, vector, bool(result.reading.required), vectors_by_tool)
            x = partial.features(names, scored, vector, vectors_by_tool)
            accepted = set().union(*(q.accepted_names(g) for g in q.expected_tool_names))
            rows_x.append(x)
            rows_y.append(np.array([1.0 if name in accepted else 0.0 for name in names]))
            rows_fold.extend([fold] * len(names))
            rows_group.extend([len(per_query)] * len(names))
            per_query.append((fold, q, names, x, base_order))
        if progress:
            progress((fold + 1) / (FOLDS + 1), f"fold {fold + 1} of {FOLDS}")
    x_all = np.vstack(rows_x) if rows_x else np.zeros((0, len(FEATURES)))
    y_all = np.concatenate(rows_y) if rows_y else np.zeros(0)
    fold_all = np.array(rows_fold)
    group_all = np.array(rows_group)

    base_rows, learned_rows = [], []
    for fold in range(FOLDS):
        train = fold_all != fold
        weights = _fit_weights(x_all[train], y_all[train], group_all[train]) if train.any() else None
        for f, q, names, x, base_order in per_query:
            if f != fold:
                continue
            base_rows.append(_scores(q, base_order))
            if weights is None or not names:
                learned_rows.append(_scores(q, base_order))
                continue
            values = x @ weights[:-1] + weights[-1]
            order = [names[i] for i in sorted(range(len(names)), key=lambda i: -values[i])]
            learned_rows.append(_scores(q, order + [n for n in base_order if n not in set(order)]))
    cv = CrossValidation(len(per_query), _mean(base_rows), _mean(learned_rows))
    ranking = _ranking(encoder_id, examples, vectors, vectors_by_tool, weights=_fit_weights(x_all, y_all, group_all), enabled=cv.wins)
    ranking.cross_validation = cv
    if not cv.wins:
        ranking.reason = "it did not beat the base ranking on the training requests' own folds"
    if progress:
        progress(1.0, "trained")
    return ranking
