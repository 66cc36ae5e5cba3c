"""Semantic ToolSearch backend: cosine similarity of all-MiniLM-L6-v2 sentence embeddings.

Each deferred tool is embedded once (`text.tool_document`: split name, server — unless the whole
catalog has one server —, description, hint, parameter names) and cached by content hash (`embedding_cache`); a query is embedded per call
(a small LRU keeps repeated queries free). Needs the `semantic` extra; without it constructing the
backend raises `EncoderUnavailable` (a ValueError) naming what is missing.
"""
from __future__ import annotations

import logging
import re
import threading
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from playground.engine.search import concurrency, language_gate, stored, text
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution
from playground.engine.search.bm25 import REQUIRED_TERM_POINTS, analyzed_fields, top_indices
from playground.engine.search.embedding_cache import EmbeddingCache, EmbedStats, VectorStore, document_keys, embed_tools, shared_cache
from playground.engine.search.encoder import MiniLMEncoder, shared_encoder
from playground.engine.search.required import RequiredTermFilter
from playground.engine.tools import Tool, ToolCatalog

logger = logging.getLogger(__name__)

_REQUIRED_MARK = re.compile(r"(^|\s)\+(?=\S)")
# A sentence encoder finds "something" for any text, gibberish included (cosines of 0.2–0.4 are
# common). ToolSearch must be able to say "no match" (and name the MCP servers still connecting),
# so dense similarity ranks tools on its own only when the query shares a word (stem) with the
# catalog, when some tool is clearly similar, or when the query reads as language
# (language_gate.py): "zzzz qqqq" finds nothing, as with the keyword backends, while a real
# request that shares no word with the catalog still gets its nearest tools.
DENSE_ONLY_MIN_SIMILARITY = language_gate.DENSE_ONLY_MIN_SIMILARITY


def dense_may_answer(sims: np.ndarray, lexical_hit: bool, language: bool = False, words: bool = True) -> bool:
    return lexical_hit or (sims.size > 0 and language_gate.dense_may_answer(float(sims.max()), lexical_hit, language, words))


def query_text(reading: QueryReading) -> str:
    """What the encoder reads: the query as typed, without the `+` of required terms."""
    return _REQUIRED_MARK.sub(r"\1", reading.raw.strip())


def query_text_spans(reading: QueryReading, spans: list[tuple[int, int]]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """`query_text(reading)`, and `spans` (character spans of `reading.raw.strip()`) moved onto it:
    each `+` that it drops shifts what follows one character left."""
    stripped = reading.raw.strip()
    dropped = [mark.end() - 1 for mark in _REQUIRED_MARK.finditer(stripped)]
    return query_text(reading), tuple((start - bisect_left(dropped, start), end - bisect_left(dropped, end)) for start, end in spans)


@dataclass
class SemanticIndex:
    tools: tuple[Tool, ...]
    vectors: np.ndarray  # (n, dim), unit rows
    required: RequiredTermFilter
    stats: EmbedStats
    vocabulary: frozenset[str]  # every stem of every field of every tool (the lexical-evidence test)
    keys: list[str] = field(default_factory=list)  # the tools' vector keys (what a stored index keeps)
    scan: Any = field(default=None, repr=False, compare=False)  # hybrid's VectorScan of `vectors` (vector_scan.py)

    @property
    def size(self) -> int:
        return len(self.tools)


class QueryEmbedder:
    """Query text → unit vector, with a small LRU (the inspector and evaluations repeat queries)."""

    def __init__(self, encoder: MiniLMEncoder, size: int = 8192):
        self.encoder = encoder
        self.size = size
        self._cache: OrderedDict[str | tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def prefetch(self, texts: list[str]) -> None:
        """Encode, in one batch, those of `texts` not cached yet; the cached ones count as used, so
        the new vectors do not push out what the caller is about to read."""
        with self._lock:
            missing = []
            for text_ in dict.fromkeys(texts):
                if text_ in self._cache:
                    self._cache.move_to_end(text_)
                else:
                    missing.append(text_)
        if missing:
            # A request's own texts: two runs at once when the host has an idle core (the same
            # vectors; concurrency.py).
            threads = concurrency.request_threads(getattr(self.encoder, "query_threads", 1))
            self._remember(missing, self.encoder.encode(missing, concurrent_runs=threads) if threads > 1 else self.encoder.encode(missing))

    def pooled(self, text: str, spans: tuple[tuple[int, int], ...]) -> np.ndarray:
        """`encoder.encode_pooled(text, spans)`, cached under (text, spans): a piece's pooled vector
        depends on the text around it, so it never shares a key with the piece encoded alone."""
        key = ("pooled", text, spans)
        with self._lock:
            vectors = self._cache.get(key)
            if vectors is not None:
                self._cache.move_to_end(key)
                return vectors
        vectors = self.encoder.encode_pooled(text, spans)
        self._remember([key, text], [vectors, vectors[0]])  # row 0 is the text's own vector
        return vectors

    def __call__(self, text: str) -> np.ndarray:
        with self._lock:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
                return vector
        vector = self.encoder.encode_one(text)
        self._remember([text], [vector])
        return vector

    def _remember(self, texts: list, vectors) -> None:
        with self._lock:
            for text_, vector in zip(texts, vectors):
                self._cache[text_] = vector
                self._cache.move_to_end(text_)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)


_query_embedders: dict[int, QueryEmbedder] = {}


def dense_side(backend: SearchBackend) -> SemanticBackend | None:
    """The backend's sentence-embedding part: itself (`semantic`, under any settings), hybrid's
    `semantic`, or None (a backend built from a spec is named by the spec, so its name says little)."""
    return backend if isinstance(backend, SemanticBackend) else getattr(backend, "semantic", None)


def use_vector_store(backend: SearchBackend, store: VectorStore) -> None:
    """Hand a backend's dense side (if it has one) the store its tool vectors are kept in."""
    dense = dense_side(backend)
    if dense is not None:
        dense.use_vector_store(store)


def query_embedder_for(encoder: MiniLMEncoder) -> QueryEmbedder:
    embedder = _query_embedders.get(id(encoder))
    if embedder is None or embedder.encoder is not encoder:
        embedder = _query_embedders[id(encoder)] = QueryEmbedder(encoder)
    return embedder


class SemanticBackend(SearchBackend):
    """Dense retrieval: rank deferred tools by cosine similarity to the query."""

    name = "semantic"
    label = "Semantic (MiniLM)"
    description = "all-MiniLM-L6-v2 sentence embeddings (ONNX Runtime, offline), cosine similarity"
    # runtime: the encoder's (`encoder.RUNTIMES`; default TOOLSEARCH_EMBEDDING_RUNTIME), e.g. to
    # compare `onnx` and `onnx-int8` side by side in one bench or evaluation run
    option_names = frozenset({"encoder", "cache", "runtime"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.encoder: MiniLMEncoder = options.get("encoder") or shared_encoder(options.get("runtime"))
        self._cache: EmbeddingCache | None = options.get("cache")
        self.embed_query = query_embedder_for(self.encoder)
        self._keys: OrderedDict[str, list[str]] = OrderedDict()  # catalog fingerprint → tool keys
        self._stored_vocabulary: OrderedDict[str, frozenset[str]] = OrderedDict()  # the same, from a stored index
        self._keys_lock = threading.Lock()

    @property
    def cache(self) -> EmbeddingCache:
        """The tool-vector cache: the one given, else this process's cache of the SQLite file (made on
        first use, so a backend handed a store by `use_vector_store` never opens the file)."""
        if self._cache is None:
            self._cache = shared_cache(self.encoder.dim)
        return self._cache

    @cache.setter
    def cache(self, cache: EmbeddingCache) -> None:
        self._cache = cache

    def use_vector_store(self, store: VectorStore) -> None:
        """Keep tool vectors in `store` (the web app's database) instead of the SQLite file."""
        self._cache = shared_cache(self.encoder.dim, store=store)

    @staticmethod
    def include_server(tools) -> bool:
        """Whether tool documents name their server: only when the tools come from several."""
        return len({t.server for t in tools}) > 1

    def tool_keys(self, catalog: ToolCatalog) -> list[str]:
        """The cache keys of the catalog's deferred tools, as `build_index` looks them up; kept for
        the last few catalogs (asking whether a catalog's vectors are stored, then building its
        index, makes them once)."""
        with self._keys_lock:
            keys = self._keys.get(catalog.fingerprint)
            if keys is not None:
                return keys
        if self._read_stored(catalog):  # a stored index has them: no tool documents to make
            with self._keys_lock:
                keys = self._keys.get(catalog.fingerprint)
            if keys is not None:
                return keys
        tools = tuple(catalog.deferred)
        keys = document_keys(tools, self.encoder.model_id, include_server=self.include_server(tools))
        self._remember(catalog.fingerprint, keys)
        return keys

    def _remember(self, fingerprint: str, keys: list[str], vocabulary: frozenset[str] | None = None) -> None:
        with self._keys_lock:
            self._keys[fingerprint] = keys
            while len(self._keys) > self._index_cache_size:
                self._keys.popitem(last=False)
            if vocabulary is not None:
                self._stored_vocabulary[fingerprint] = vocabulary
                while len(self._stored_vocabulary) > self._index_cache_size:
                    self._stored_vocabulary.popitem(last=False)

    def _read_stored(self, catalog: ToolCatalog) -> bool:
        """Take the catalog's keys and vocabulary from the stored index, if there is one; when it
        holds the vectors too, the whole index (kept as if built: `has_index` is then true)."""
        store = self.index_store
        if store is None:
            return False
        try:
            data = store.get(self.stored_index_key(catalog))
            if data is None:
                return False
            index = self._index_with_stored_vectors(data, catalog)
            if index is not None:
                with self._lock:
                    self._indexes[catalog.fingerprint] = index
                    while len(self._indexes) > self._index_cache_size:
                        self._indexes.popitem(last=False)
            return True
        except Exception:
            logger.exception("%s: could not read the stored index of %s", self.name, catalog.fingerprint)
            return False

    def load_stored_vectors(self, catalog: ToolCatalog) -> bool:
        """Whether the catalog's index is in memory now, loaded from a stored index that holds its
        vectors (nothing to ask the vector store, nothing to encode)."""
        if self.has_index(catalog):
            return True
        with self._keys_lock:
            known = catalog.fingerprint in self._keys
        return not known and self._read_stored(catalog) and self.has_index(catalog)

    def _index_with_stored_vectors(self, data: bytes, catalog: ToolCatalog) -> SemanticIndex | None:
        """The index a stored blob holds when it has the vectors (stored since they were kept in
        it); else None, having taken its keys and vocabulary."""
        arrays, texts, meta = stored.unpack(data)
        keys, vocabulary = texts["keys"], frozenset(texts["vocabulary"])
        if meta["size"] != len(catalog.deferred) or len(keys) != len(catalog.deferred):
            raise ValueError(f"stored index of {meta['size']} tools, catalog of {len(catalog.deferred)}")
        self._remember(catalog.fingerprint, keys, vocabulary)
        vectors = arrays.get("vectors")
        if vectors is None or vectors.shape != (len(keys), self.encoder.dim):
            return None
        tools = tuple(catalog.deferred)
        return SemanticIndex(tools=tools, vectors=vectors, required=RequiredTermFilter.of(catalog),
                             stats=EmbedStats(reused=len(tools)), vocabulary=vocabulary, keys=keys)

    def build_index(self, catalog: ToolCatalog) -> SemanticIndex:
        tools = tuple(catalog.deferred)
        vocabulary = frozenset(stem for tool in tools for stems in analyzed_fields(tool).values() for stem in stems)
        return self._index(catalog, self.tool_keys(catalog), vocabulary)

    def _index(self, catalog: ToolCatalog, keys: list[str], vocabulary: frozenset[str]) -> SemanticIndex:
        tools = tuple(catalog.deferred)
        include_server = self.include_server(tools)
        vectors, stats = embed_tools(
            tools, self.encoder.encode, self.cache, model_id=self.encoder.model_id, include_server=include_server, keys=keys,
            keep_in_memory=False,  # the matrix holds them; the store still has them for a rebuild
        )
        return SemanticIndex(tools=tools, vectors=vectors, required=RequiredTermFilter.of(catalog), stats=stats,
                             vocabulary=vocabulary, keys=keys)

    # -- a stored index (stored.py): the vector keys, the vocabulary and the vectors themselves
    # (float32, as built), so that a fresh process reads one blob instead of looking 100,000
    # vectors up by key in the vector store (docs/benchmarks.md, "Speed"). A blob stored without
    # vectors (older ones) still gives the keys, and the vectors come from the store.
    def stored_index_key(self, catalog: ToolCatalog) -> str | None:
        return f"dense.{stored.FORMAT}.{self.encoder.model_id}.{catalog.fingerprint}"

    def dump_index(self, index: SemanticIndex) -> bytes:
        return self._pack(index.keys, index.vocabulary, index.vectors)

    @staticmethod
    def _pack(keys: list[str], vocabulary: frozenset[str], vectors: np.ndarray | None = None) -> bytes:
        arrays = {} if vectors is None else {"vectors": np.asarray(vectors, dtype=np.float32)}
        return stored.pack(arrays, {"keys": keys, "vocabulary": sorted(vocabulary)}, {"size": len(keys)})

    def load_index(self, data: bytes, catalog: ToolCatalog) -> SemanticIndex:
        index = self._index_with_stored_vectors(data, catalog)
        if index is not None:
            return index
        with self._keys_lock:
            keys = self._keys[catalog.fingerprint]
            vocabulary = self._stored_vocabulary[catalog.fingerprint]
        return self._index(catalog, keys, vocabulary)

    def reads_as_language(self, reading: QueryReading) -> bool:
        """Whether the query reads as language to this encoder (language_gate.py)."""
        return language_gate.reads_as_language(query_text(reading), language_gate.encoder_words(self.encoder))

    def similarities(self, reading: QueryReading, index: SemanticIndex) -> np.ndarray:
        if index.size == 0:
            return np.zeros(0, dtype=np.float32)
        return index.vectors @ self.embed_query(query_text(reading))

    def rank(self, reading: QueryReading, index: SemanticIndex, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        sims = self.similarities(reading, index)
        if not dense_may_answer(sims, any(stem in index.vocabulary for stem in text.analyze(query_text(reading))), self.reads_as_language(reading),
                                language_gate.has_words(query_text(reading))):
            return []
        scores = sims
        mask = index.required.mask(reading.required)
        if mask is not None:
            # As in BM25: every tool that passes the required terms ranks (score > 0), by similarity.
            scores = np.where(mask, np.clip(sims, 0.0, None) + REQUIRED_TERM_POINTS * len(reading.required), 0.0)
        results: list[ScoredTool] = []
        for i in top_indices(scores, max_results):
            breakdown = [
                TermContribution(
                    term=query_text(reading),
                    rule="cosine similarity",
                    points=round(float(scores[i]) - REQUIRED_TERM_POINTS * len(reading.required), 4),
                    field="embedding",
                    detail=f"{self.encoder.model_id}: cosine {float(sims[i]):.3f} between query and tool text",
                )
            ]
            breakdown += [
                TermContribution(term=term, rule="required term matched", points=REQUIRED_TERM_POINTS, field="name/description/search_hint")
                for term in reading.required
            ]
            results.append(ScoredTool(name=index.tools[i].name, score=round(float(scores[i]), 4), breakdown=breakdown))
        return results
