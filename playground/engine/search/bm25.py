"""BM25 ToolSearch backend over a tool's fields, with field weights.

Each field of a tool (`text.tool_fields`: name parts, server, description, search hint, input-schema
property names and descriptions) is analysed by `text.analyze` (split identifiers, stopwords,
Snowball stems), then scored with BM25F (Robertson, Zaragoza & Taylor 2004): a term's frequencies
in all fields are weighted, length-normalised per field and added, then saturated once with k1,
times one IDF over whole tools. A term found in the name and the description is not counted as two
independent matches, and its repetition still counts. (The per-field alternative, one BM25 per
field summed, lost the evaluation and was removed; its figures stay in docs/search-quality.md.)
The explanation of a ranked tool lists every (query term, field) that contributed, with its points:
a term's score shared among its fields by their weighted tf.

Learning from usage (`search(..., usage=UsageLog)`): the past queries that led to a tool are one
more field, "usage" (`UsageIndex`: the same scores as a BM25F field, in an index of its own).

Required terms (`+term`) filter candidates by the Claude Code rule (`names.matches_required_term`),
as the CC backend does; every surviving candidate gets the same small constant per required term so
a tool that matches only by the CC rule (e.g. `+git` inside `github`) still ranks, without changing
the order among the others. Ties keep catalog order.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from playground.engine.search import stored, text
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution, number_option
from playground.engine.search.required import RequiredTermFilter
from playground.engine.search.usage import UsageLog
from playground.engine.tools import Tool, ToolCatalog

logger = logging.getLogger(__name__)

# Tuned on the development split of every toolset (see docs/search-quality.md).
DEFAULT_K1 = 0.8
DEFAULT_FIELD_WEIGHTS = {"name": 2.0, "server": 1.0, "description": 1.0, "search_hint": 1.0, "schema": 0.6}
REQUIRED_TERM_POINTS = 0.01
DEFAULT_SERVER_WEIGHT = 0.3
# The "usage" field (past queries that led to the tool, usage.py): a BM25F field with this weight
# (chosen by 5-fold cross-validation within the development split: docs/search-quality.md),
# kept in its own small index (UsageIndex) so that a new log entry rebuilds only the log's postings.
USAGE_FIELD = "usage"
DEFAULT_USAGE_WEIGHT = 1.0
USAGE_NOTE = "; learned: past searches that led to this tool"


class Postings:
    """Lookups over compressed postings: `vocab` (token → id), and for token id t the tools
    `indices[indptr[t]:indptr[t+1]]` (ascending) with their scores in `data`."""

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


@dataclass
class BM25FIndex(Postings):
    """BM25F (Robertson, Zaragoza & Taylor 2004) postings: per (term, tool) the final score
    idf(t) × tf~ / (k1 + tf~), with tf~ = Σ_field weight × tf / (1 − b_f + b_f × len_f / avglen_f)
    and one idf over whole tools. Weights, b and k1 are fixed at build time, so a query costs one
    posting per term. The per-field shares (explanations) are recomputed for the shown tools
    from their analysed fields and the field length norms kept here."""

    k1: float
    weights: dict[str, float]
    norms: dict[str, np.ndarray]  # per field: 1 − b_f + b_f × len_f / avglen_f, per tool
    analysed: Sequence[dict[str, list[str]]]  # per tool, its analysed fields (shared with the cache; lazy when loaded)
    vocab: dict[str, int]
    idf: np.ndarray
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray

    def field_tfs(self, token: str, doc: int) -> dict[str, float]:
        """The token's weighted, length-normalised tf in each field of `doc` (only fields with one)."""
        out: dict[str, float] = {}
        for field_name, weight in self.weights.items():
            tf = self.analysed[doc][field_name].count(token)
            if tf:
                out[field_name] = weight * tf / float(self.norms[field_name][doc])
        return out


def build_bm25f_index(
    analysed: list[dict[str, list[str]]], weights: dict[str, float], field_b: dict[str, float], *, k1: float
) -> BM25FIndex:
    n = len(analysed)
    vocab: dict[str, int] = {}
    lookup = vocab.setdefault
    all_keys: list[np.ndarray] = []
    all_tf: list[np.ndarray] = []
    norms: dict[str, np.ndarray] = {}
    for field_name, weight in weights.items():
        lengths = np.fromiter((len(a[field_name]) for a in analysed), dtype=np.int64, count=n)
        total = int(lengths.sum())
        average = total / n if n else 0.0
        b = field_b[field_name]
        norm = (1.0 - b + b * lengths / average) if average > 0 else np.ones(n)
        norms[field_name] = norm.astype(np.float64)
        if total == 0:
            continue
        terms = np.fromiter((lookup(t, len(vocab)) for a in analysed for t in a[field_name]), dtype=np.int64, count=total)
        docs = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys, counts = np.unique(terms * n + docs, return_counts=True)
        all_keys.append(keys)
        all_tf.append(weight * counts / norm[keys % n])
    if not all_keys:
        empty = np.zeros(0)
        return BM25FIndex(k1, weights, norms, analysed, vocab, empty, empty.astype(np.float32), empty.astype(np.int64), np.zeros(1, dtype=np.int64))
    keys, inverse = np.unique(np.concatenate(all_keys), return_inverse=True)
    pseudo_tf = np.bincount(inverse, weights=np.concatenate(all_tf), minlength=keys.size)
    term_ids, doc_ids = keys // n, keys % n
    df = np.bincount(term_ids, minlength=len(vocab))
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    data = (idf[term_ids] * pseudo_tf / (k1 + pseudo_tf)).astype(np.float32)
    indptr = np.searchsorted(term_ids, np.arange(len(vocab) + 1))
    return BM25FIndex(k1, weights, norms, analysed, vocab, idf, data, doc_ids.astype(np.int32), indptr)


@dataclass
class UsageIndex(Postings):
    """The tools' past queries (usage.py) as a BM25F field kept apart from the catalog's index, so
    that a new log entry costs the log's size, not a re-index of the catalog.

    Scores are exactly those of a BM25F index with "usage" as one more field: postings hold the
    field's weighted, length-normalised tf (`data`) for the tools with a past query; at query time
    a term's usage tf joins the tool's tf~ from the other fields before the one saturation
    (`gains`), and a term the log adds to tools that lacked it gets the lower idf BM25F would give
    it — on every tool (`scale`: the catalog index's scores of that term × new idf / old idf)."""

    weight: float
    k1: float
    vocab: dict[str, int]
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    idf: np.ndarray  # per usage term id: the idf with the log's tools counted
    main_idf: np.ndarray  # per usage term id: the catalog index's idf (0: not there)
    rescale: dict[str, float]  # token → new idf / old idf, for catalog terms whose df the log raised

    def scale(self, token: str) -> float:
        return self.rescale.get(token, 1.0)

    def gains(self, token: str, docs: np.ndarray | None, main: Postings | None) -> tuple[np.ndarray, np.ndarray] | None:
        """(tools, what the usage field adds to this term's score on each, beyond the catalog
        index's rescaled score) for the tools with the term in their past queries (all, or those
        in `docs`). `main`: the BM25F postings the usage tf joins (None: the field on its own)."""
        hit = self.postings(token)
        if hit is None:
            return None
        tools, usage_tf = hit
        if docs is not None:
            keep = np.isin(tools, docs)
            tools, usage_tf = tools[keep], usage_tf[keep]
            if tools.size == 0:
                return None
        term_id = self.vocab[token]
        idf, old_idf = float(self.idf[term_id]), float(self.main_idf[term_id])
        before = np.zeros(tools.size, dtype=np.float64)
        main_hit = main.postings(token) if main is not None and old_idf > 0 else None
        if main_hit is not None:
            main_docs, main_scores = main_hit
            at = np.minimum(main_docs.searchsorted(tools), main_docs.size - 1)
            found = main_docs[at] == tools
            before[found] = main_scores[at[found]]
        # The catalog index's s = old idf × tf~ / (k1 + tf~) gives back the other fields' tf~.
        tf_main = self.k1 * before / np.maximum(old_idf - before, 1e-9) if old_idf > 0 else before
        tf_all = tf_main + usage_tf
        return tools, idf * tf_all / (self.k1 + tf_all) - before * (idf / old_idf if old_idf > 0 else 0.0)


def build_usage_index(index: BM25Index, usage: UsageLog, *, weight: float, k1: float, b: float) -> UsageIndex | None:
    """The usage field of `index`'s tools; None when the log names none of them. Its length norm
    averages over every tool (a tool without a past query has an empty field), as in BM25F."""
    positions = index.positions
    found = sorted(
        (positions[name], tokens) for name, queries in usage.queries.items()
        if name in positions and (tokens := analyzed_usage(queries))
    )
    if not found:
        return None
    count, total = len(found), index.size
    docs = np.fromiter((doc for doc, _ in found), dtype=np.int64, count=count)
    lengths = np.fromiter((len(tokens) for _, tokens in found), dtype=np.int64, count=count)
    norm = 1.0 - b + b * lengths / (lengths.sum() / total)
    vocab: dict[str, int] = {}
    lookup = vocab.setdefault
    terms = np.fromiter((lookup(t, len(vocab)) for _, tokens in found for t in tokens), dtype=np.int64, count=int(lengths.sum()))
    local = np.repeat(np.arange(count, dtype=np.int64), lengths)
    keys, tf = np.unique(terms * count + local, return_counts=True)
    term_ids, local_ids = keys // count, keys % count
    tools = docs[local_ids]
    indptr = np.searchsorted(term_ids, np.arange(len(vocab) + 1))
    df = np.diff(indptr).astype(np.float64)  # tools with the term in their past queries
    main_idf = np.zeros(len(vocab))
    main = index.bm25f
    if main is not None:
        # With the log, a term's df is the catalog's (read back from its idf) plus the tools that
        # have it only in their past queries.
        for token, term_id in vocab.items():
            main_id = main.vocab.get(token)
            if main_id is None:
                continue
            main_idf[term_id] = old = float(main.idf[main_id])
            main_df = (total + 0.5 - 0.5 * np.expm1(old)) / np.exp(old)
            posting = main.postings(token)
            mine = tools[indptr[term_id]:indptr[term_id + 1]]
            df[term_id] = main_df + mine.size - (np.isin(mine, posting[0]).sum() if posting is not None else 0)
    idf = np.log(1.0 + (total - df + 0.5) / (df + 0.5))
    rescale = {
        token: float(idf[term_id] / main_idf[term_id]) for token, term_id in vocab.items()
        if main_idf[term_id] > 0 and abs(idf[term_id] - main_idf[term_id]) > 1e-12
    }
    data = (weight * tf / norm[local_ids]).astype(np.float64)
    return UsageIndex(weight, k1, vocab, data, tools.astype(np.int32), indptr, idf, main_idf, rescale)


@dataclass
class BM25Index:
    tools: tuple[Tool, ...]  # the catalog's deferred tools, in catalog order
    required: RequiredTermFilter
    servers: ServerGroups
    bm25f: BM25FIndex
    usage: UsageIndex | None = None  # past queries (learning from usage)
    _positions: dict[str, int] | None = None

    @property
    def size(self) -> int:
        return len(self.tools)

    @property
    def positions(self) -> dict[str, int]:
        """Tool name → its position (built once per catalog index, shared by its usage indexes)."""
        if self._positions is None:
            self._positions = {tool.name: i for i, tool in enumerate(self.tools)}
        return self._positions


class LazyAnalysed(Sequence):
    """The tools' analysed fields, analysed when asked for: an index loaded from a store needs
    them only for the few tools an explanation shows, not for the whole catalog."""

    def __init__(self, tools: Sequence[Tool]):
        self.tools = tools

    def __len__(self) -> int:
        return len(self.tools)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [analyzed_fields(tool) for tool in self.tools[i]]
        return analyzed_fields(self.tools[i])


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


_usage_cache: dict[tuple[str, ...], list[str]] = {}


def analyzed_usage(queries: tuple[str, ...]) -> list[str]:
    """A tool's past queries, analysed like its other fields (memoised: a new log entry for one
    tool re-analyses only that tool's queries)."""
    if not queries:
        return []
    cached = _usage_cache.get(queries)
    if cached is None:
        cached = [token for query in queries for token in text.analyze(query)]
        if len(_usage_cache) >= _ANALYSIS_CACHE_MAX:
            _usage_cache.clear()
        _usage_cache[queries] = cached
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
        self._all_have_server = bool(self.has_server.all())

    def boost(self, scores: np.ndarray, weight: float) -> np.ndarray:
        """weight × (best score among the tool's server), per tool (0 for tools without a server)."""
        if weight <= 0 or self.count == 0:
            return np.zeros_like(scores)
        best = np.zeros(self.count, dtype=np.float32)
        if self._all_have_server:  # the usual catalog: no masks to apply (a third of the time at 100,000 tools)
            np.maximum.at(best, self.ids, scores)
            return (weight * best[self.ids]).astype(np.float32, copy=False)
        np.maximum.at(best, self.ids[self.has_server], scores[self.has_server])
        return np.where(self.has_server, weight * best[np.maximum(self.ids, 0)], 0.0).astype(np.float32)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class BM25Backend(SearchBackend):
    """Field-weighted BM25 over name parts, server, description, search hint and schema."""

    name = "bm25"
    label = "BM25F (fielded)"
    description = "BM25F over name parts, server, description, hint and schema, stopwords and stemming"
    option_names = frozenset({"field_weights", "k1", "b", "server_weight", "scoring", "field_b", "usage_weight"})
    reads_usage = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Kept as an option so that specs saved with scoring="bm25f" still load; the per-field
        # scoring lost the evaluation and was removed.
        scoring = str(options.get("scoring", "bm25f"))
        if scoring != "bm25f":
            raise ValueError(f"BM25 scoring {scoring!r} was removed (it lost the evaluation: docs/search-quality.md); only \"bm25f\" remains")
        given = options.get("field_weights") or {}
        if not isinstance(given, Mapping) or not all(_is_number(w) for w in given.values()):
            raise ValueError(f"BM25 field_weights must map fields to numbers, e.g. {{\"name\": 2}}, not {given!r}")
        weights = dict(DEFAULT_FIELD_WEIGHTS)
        weights.update(given)
        unknown = set(weights) - set(text.FIELDS)
        if unknown:
            raise ValueError(f"unknown BM25 field(s) {sorted(unknown)}; fields are {list(text.FIELDS)}")
        self.field_weights = {name: number_option(f"BM25 field_weights[{name!r}]", w, 0, 1000) for name, w in weights.items()}
        self.k1 = number_option("BM25 k1", options.get("k1", DEFAULT_K1), 0, 100)
        self.b = number_option("BM25 b", options.get("b", 0.75), 0, 1)
        self.server_weight = number_option("BM25 server_weight", options.get("server_weight", DEFAULT_SERVER_WEIGHT), 0, 100)
        field_b = {name: self.b for name in text.FIELDS}
        given_b = options.get("field_b") or {}
        if not isinstance(given_b, Mapping) or not all(_is_number(v) for v in given_b.values()):
            raise ValueError(f"BM25 field_b must map fields to numbers, not {given_b!r}")
        field_b.update({k: number_option(f"BM25 field_b[{k!r}]", v, 0, 1) for k, v in given_b.items()})
        unknown = set(field_b) - set(text.FIELDS) - {USAGE_FIELD}
        if unknown:
            raise ValueError(f"unknown BM25 field(s) {sorted(unknown)}; fields are {list(text.FIELDS)} and {USAGE_FIELD!r}")
        field_b.setdefault(USAGE_FIELD, self.b)
        self.field_b = field_b
        self.usage_weight = float(options.get("usage_weight", DEFAULT_USAGE_WEIGHT))
        if self.usage_weight < 0:
            raise ValueError(f"BM25 usage_weight must be 0 (off) or more, not {self.usage_weight!r}")
        number_option("BM25 usage_weight", self.usage_weight, 0, 1000)

    # -- index ---------------------------------------------------------------------------------
    def build_index(self, catalog: ToolCatalog, usage: UsageLog | None = None) -> BM25Index:
        if usage is not None:
            # The catalog's own index (cached) plus the log's postings: a new log entry costs the
            # log's size, not a re-index of the catalog.
            index = self.index_for(catalog)
            learned = None
            if self.usage_weight > 0:
                learned = build_usage_index(index, usage, weight=self.usage_weight, k1=self.k1, b=self.field_b[USAGE_FIELD])
            return replace(index, usage=learned) if learned is not None else index
        tools = tuple(catalog.deferred)
        analysed = [analyzed_fields(tool) for tool in tools]
        weights = {name: w for name, w in self.field_weights.items() if w > 0}
        bm25f = build_bm25f_index(analysed, weights, self.field_b, k1=self.k1)
        return BM25Index(tools, RequiredTermFilter.of(catalog), ServerGroups(tools), bm25f)

    # -- a stored index (stored.py) --------------------------------------------------------------
    def _index_settings(self) -> dict[str, Any]:
        return {"weights": {name: w for name, w in self.field_weights.items() if w > 0}, "field_b": self.field_b, "k1": self.k1}

    def stored_index_key(self, catalog: ToolCatalog) -> str | None:
        digest = hashlib.sha1(json.dumps(self._index_settings(), sort_keys=True).encode()).hexdigest()[:16]
        return f"bm25f.{stored.FORMAT}.{digest}.{catalog.fingerprint}"

    def dump_index(self, index: BM25Index) -> bytes:
        b = index.bm25f
        arrays = {"idf": b.idf, "data": b.data, "indices": b.indices, "indptr": b.indptr}
        arrays.update({f"norm.{name}": norm for name, norm in b.norms.items()})
        meta = {"size": index.size}  # k1 and weights are in the key: this backend's own
        return stored.pack(arrays, {"vocab": list(b.vocab)}, meta)  # vocab in id order (ids are insertion order)

    def load_index(self, data: bytes, catalog: ToolCatalog) -> BM25Index:
        arrays, texts, meta = stored.unpack(data)
        tools = tuple(catalog.deferred)
        if meta["size"] != len(tools):
            raise ValueError(f"stored index of {meta['size']} tools, catalog of {len(tools)}")
        vocab = {token: i for i, token in enumerate(texts["vocab"])}
        weights = self._index_settings()["weights"]  # in this backend's field order, as a build has them
        norms = {name: arrays[f"norm.{name}"] for name in weights}
        bm25f = BM25FIndex(self.k1, weights, norms, LazyAnalysed(tools), vocab,
                           arrays["idf"], arrays["data"], arrays["indices"], arrays["indptr"])
        return BM25Index(tools, RequiredTermFilter.of(catalog), ServerGroups(tools), bm25f)

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
        usage = index.usage
        for token in tokens:
            hit = index.bm25f.postings(token)
            if hit is not None:
                docs, scores = hit
                factor = usage.scale(token) if usage is not None else 1.0  # the log may lower a term's idf
                total[docs] += factor * scores  # doc ids are unique within a posting
        if index.usage is not None:
            for token in tokens:
                gained = index.usage.gains(token, None, index.bm25f)
                if gained is not None:
                    docs, gains = gained
                    total[docs] += gains
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
        breakdowns = self.bm25f_contributions(wanted, pairs, index.bm25f, index.usage)
        if index.usage is not None:
            row = {doc: j for j, doc in enumerate(wanted.tolist())}
            for token, term in pairs:
                gained = index.usage.gains(token, wanted, index.bm25f)
                if gained is None:
                    continue
                for doc, points in zip(*gained):
                    breakdowns[row[int(doc)]].append(
                        TermContribution(
                            term=term, rule=f"bm25 {USAGE_FIELD}", points=round(float(points), 4), field=USAGE_FIELD,
                            detail=f"stem '{token}': what the usage field (weight {index.usage.weight:g}) adds to the term's score{USAGE_NOTE}",
                        )
                    )
        return breakdowns

    def bm25f_contributions(
        self, wanted: np.ndarray, pairs: Sequence[tuple[str, str]], index: BM25FIndex, usage: UsageIndex | None = None,
    ) -> list[list[TermContribution]]:
        """BM25F: a term's score on a tool, shared among its fields in proportion to each field's
        weighted, length-normalised tf (the shares add up to the term's score). With a usage log,
        the catalog fields' scores carry the idf the log gives the term."""
        breakdowns: list[list[TermContribution]] = [[] for _ in range(wanted.size)]
        factors = {token: usage.scale(token) if usage is not None else 1.0 for token, _ in pairs}
        # Read off the shown tools' own analysed fields (a few tools), not the postings: one set
        # lookup per (term, tool) instead of a binary search per term. The score is the posting's
        # value, computed as the index computed it (same float64 sum, same float32 rounding).
        for j, doc in enumerate(wanted.tolist()):
            present = set().union(*index.analysed[doc].values())
            for token, term in pairs:
                if token not in present:
                    continue
                tfs = index.field_tfs(token, doc)
                pseudo_tf = sum(tfs.values())
                if pseudo_tf <= 0:
                    continue
                idf = float(index.idf[index.vocab[token]])
                raw = float(np.float32(idf * pseudo_tf / (index.k1 + pseudo_tf))) * factors[token]
                if raw <= 0:
                    continue
                for field_name, tf in tfs.items():
                    breakdowns[j].append(
                        TermContribution(
                            term=term,
                            rule=f"bm25f {field_name}",
                            points=round(raw * tf / pseudo_tf, 4),
                            field=field_name,
                            detail=(
                                f"stem '{token}': bm25f {raw:.3f} (tf~ {pseudo_tf:.2f}, k1 {index.k1:g}), "
                                f"{field_name} share {tf / pseudo_tf:.0%} (weight {index.weights[field_name]:g})"
                            ),
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

