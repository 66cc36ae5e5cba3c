"""BM25 ToolSearch backend: one `bm25s` index per field, fused with field weights.

Each field of a tool (`text.tool_fields`: name parts, server, description, search hint, input-schema
property names and descriptions) is analysed by `text.analyze` (split identifiers, stopwords,
Snowball stems) and indexed by its own BM25 (Lucene variant), so a term's rarity is judged within
its field. A tool's score is the weighted sum of its field scores. The explanation of a ranked tool
lists every (query term, field) that contributed, with its weighted points.

Required terms (`+term`) filter candidates by the Claude Code rule (`names.matches_required_term`),
as the CC backend does; every surviving candidate gets the same small constant per required term so
a tool that matches only by the CC rule (e.g. `+git` inside `github`) still ranks, without changing
the order among the others. Ties keep catalog order.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bm25s
import numpy as np

from playground.engine.search import text
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution
from playground.engine.search.required import RequiredTermFilter
from playground.engine.tools import Tool, ToolCatalog

logger = logging.getLogger(__name__)

# Tuned on the development split of every toolset (see README "Search quality").
DEFAULT_FIELD_WEIGHTS: dict[str, float] = {
    "name": 1.0,
    "server": 1.0,
    "description": 1.0,
    "search_hint": 1.0,
    "schema": 0.6,
}
REQUIRED_TERM_POINTS = 0.01
DEFAULT_SERVER_WEIGHT = 0.3


@dataclass
class FieldIndex:
    """One field's BM25 postings (bm25s' eager CSC score matrix) and vocabulary."""

    weight: float
    vocab: dict[str, int]
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray

    def postings(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        token_id = self.vocab.get(token)
        if token_id is None:
            return None
        start, end = self.indptr[token_id], self.indptr[token_id + 1]
        if start == end:
            return None
        return self.indices[start:end], self.data[start:end]

    def scores_of(self, token: str, docs: np.ndarray) -> list[tuple[int, float]]:
        """(position in `docs`, raw BM25 score) for each of `docs` the token scores on: one
        binary search over the posting for all of them."""
        hit = self.postings(token)
        if hit is None:
            return []
        posting_docs, posting_scores = hit
        positions = posting_docs.searchsorted(docs)
        positions[positions >= len(posting_docs)] = len(posting_docs) - 1
        found = np.flatnonzero(posting_docs[positions] == docs)
        return [(j, float(posting_scores[positions[j]])) for j in found.tolist()]


@dataclass
class BM25Index:
    tools: tuple[Tool, ...]  # the catalog's deferred tools, in catalog order
    fields: dict[str, FieldIndex]
    required: RequiredTermFilter
    servers: ServerGroups

    @property
    def size(self) -> int:
        return len(self.tools)


_analysis_cache: dict[str, dict[str, list[str]]] = {}
_ANALYSIS_CACHE_MAX = 250_000


def analyzed_fields(tool: Tool) -> dict[str, list[str]]:
    """A tool's analysed fields, memoised by content hash: a re-index after a sync re-analyses
    only tools that changed (the BM25 statistics themselves are global and are recomputed)."""
    key = tool.content_hash
    cached = _analysis_cache.get(key)
    if cached is None:
        cached = {name: text.analyze(value) for name, value in text.tool_fields(tool).items()}
        if len(_analysis_cache) >= _ANALYSIS_CACHE_MAX:
            _analysis_cache.clear()
        _analysis_cache[key] = cached
    return cached


class ServerGroups:
    """Tools grouped by server, for server-level routing: a tool also scores by how well its
    server's best tool matches (multi-step requests mostly need several tools of one server).
    A catalog of one-tool servers or of a single server gets no change in order from it."""

    def __init__(self, tools: Sequence[Tool]):
        ids: dict[str, int] = {}
        self.ids = np.array([ids.setdefault(t.server, len(ids)) if t.server else -1 for t in tools], dtype=np.int64)
        self.count = len(ids)
        self.has_server = self.ids >= 0

    def boost(self, scores: np.ndarray, weight: float) -> np.ndarray:
        """weight × (best score among the tool's server), per tool (0 for tools without a server)."""
        if weight <= 0 or self.count == 0:
            return np.zeros_like(scores)
        best = np.zeros(self.count, dtype=np.float32)
        np.maximum.at(best, self.ids[self.has_server], scores[self.has_server])
        return np.where(self.has_server, weight * best[np.maximum(self.ids, 0)], 0.0).astype(np.float32)


def build_field_index(docs: Sequence[list[str]], weight: float, *, k1: float, b: float) -> FieldIndex:
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    # bm25s rejects an all-empty corpus; a placeholder token nobody can type keeps shapes simple.
    corpus = [tokens if tokens else ["\x00"] for tokens in docs]
    retriever.index(corpus, show_progress=False)
    scores = retriever.scores
    return FieldIndex(
        weight=weight,
        vocab=dict(retriever.vocab_dict),
        data=np.asarray(scores["data"], dtype=np.float32),
        indices=np.asarray(scores["indices"]),
        indptr=np.asarray(scores["indptr"]),
    )


class BM25Backend(SearchBackend):
    """Field-weighted BM25 over name parts, server, description, search hint and schema."""

    name = "bm25"
    label = "BM25 (fielded)"
    description = "bm25s per field (name parts, server, description, hint, schema), stopwords and stemming"
    option_names = frozenset({"field_weights", "k1", "b", "server_weight"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        weights = dict(DEFAULT_FIELD_WEIGHTS)
        weights.update(options.get("field_weights") or {})
        unknown = set(weights) - set(text.FIELDS)
        if unknown:
            raise ValueError(f"unknown BM25 field(s) {sorted(unknown)}; fields are {list(text.FIELDS)}")
        self.field_weights = weights
        self.k1 = float(options.get("k1", 1.2))
        self.b = float(options.get("b", 0.75))
        self.server_weight = float(options.get("server_weight", DEFAULT_SERVER_WEIGHT))

    # -- index ---------------------------------------------------------------------------------
    def build_index(self, catalog: ToolCatalog) -> BM25Index:
        tools = tuple(catalog.deferred)
        analysed = [analyzed_fields(tool) for tool in tools]
        fields = {
            name: build_field_index([a[name] for a in analysed], weight, k1=self.k1, b=self.b)
            for name, weight in self.field_weights.items()
            if weight > 0
        }
        return BM25Index(tools, fields, RequiredTermFilter(tools), ServerGroups(tools))

    # -- ranking -------------------------------------------------------------------------------
    def query_tokens(self, reading: QueryReading) -> list[tuple[str, str]]:
        """(stem, the query term it came from), each stem once, in query order."""
        seen: set[str] = set()
        pairs: list[tuple[str, str]] = []
        for term, stems in text.analyze_terms(reading.scoring_terms):
            for token in stems:
                if token not in seen:
                    seen.add(token)
                    pairs.append((token, term))
        return pairs

    def score_all(self, tokens: Sequence[str], index: BM25Index) -> np.ndarray:
        """The fused BM25 score of every deferred tool (postings are added, never a dense scan)."""
        total = np.zeros(index.size, dtype=np.float32)
        for field_index in index.fields.values():
            for token in tokens:
                hit = field_index.postings(token)
                if hit is not None:
                    docs, scores = hit
                    total[docs] += field_index.weight * scores  # doc ids are unique within a posting
        return total

    def rank(self, reading: QueryReading, index: BM25Index, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        if index.size == 0:
            return []
        pairs = self.query_tokens(reading)
        scores = self.score_all([token for token, _ in pairs], index)
        mask = index.required.mask(reading.required)
        if mask is not None:
            scores = np.where(mask, scores, 0.0).astype(np.float32)
        server = index.servers.boost(scores, self.server_weight)
        scores = scores + server
        if mask is not None:
            scores = np.where(mask, scores + REQUIRED_TERM_POINTS * len(reading.required), 0.0).astype(np.float32)
        order = top_indices(scores, max_results)
        terms = self.term_contributions(order, pairs, index)
        return [
            self.explain(i, float(scores[i]), reading, index, terms=found, server=float(server[i])) for i, found in zip(order, terms)
        ]

    def term_contributions(self, docs: Sequence[int], pairs: Sequence[tuple[str, str]], index: BM25Index) -> list[list[TermContribution]]:
        """For each of `docs`: every (query term, field) that scored on it, with its weighted points
        (term by term, fields in index order). One posting lookup per (term, field) serves all docs."""
        wanted = np.asarray(docs, dtype=np.int64)
        breakdowns: list[list[TermContribution]] = [[] for _ in docs]
        if wanted.size == 0:
            return breakdowns
        for token, term in pairs:
            for field_name, field_index in index.fields.items():
                for j, raw in field_index.scores_of(token, wanted):
                    if raw > 0:
                        breakdowns[j].append(
                            TermContribution(
                                term=term,
                                rule=f"bm25 {field_name}",
                                points=round(field_index.weight * raw, 4),
                                field=field_name,
                                detail=f"stem '{token}': bm25 {raw:.3f} × weight {field_index.weight:g}",
                            )
                        )
        return breakdowns

    def explain(
        self, doc: int, score: float, reading: QueryReading, index: BM25Index,
        *, terms: list[TermContribution], server: float = 0.0,
    ) -> ScoredTool:
        breakdown = list(terms)
        if server > 0:
            breakdown.append(
                TermContribution(
                    term="(server)", rule="server's best tool", points=round(server, 4), field="server",
                    detail=f"{index.tools[doc].server}: weight {self.server_weight:g} × its best-scoring tool",
                )
            )
        for term in reading.required:
            breakdown.append(
                TermContribution(
                    term=term,
                    rule="required term matched",
                    points=REQUIRED_TERM_POINTS,
                    field="name/description/search_hint",
                    detail="Claude Code rule: name part substring or whole word in description/hint",
                )
            )
        return ScoredTool(name=index.tools[doc].name, score=round(score, 4), breakdown=breakdown)


def top_indices(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best positive scores, best first, ties in index (= catalog) order."""
    positive = np.flatnonzero(scores > 0)
    if positive.size == 0:
        return []
    values = scores[positive]
    if positive.size > k:
        # Everything at least as good as the k-th best, so ties at the cut keep catalog order.
        kth = np.partition(values, positive.size - k)[positive.size - k]
        keep = values >= kth
        positive, values = positive[keep], values[keep]
    order = np.lexsort((positive, -values))[:k]
    return positive[order].tolist()

