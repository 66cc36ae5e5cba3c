"""Speed of the retrieval backends (bm25, semantic, hybrid) on the engine bench's catalogs and queries.

Rows have the engine bench's shape (`scorer.BenchRow`: tools, style, backend, p50_ms, p95_ms,
build_s) and come from the same scaled catalogs (real tools, renamed replicas) and the same
keyword / natural queries, so `bench` prints one table for every backend.

Embeddings of replicas: a replica differs from its original only in a server suffix and a
"(replica N)" mark, so for the *latency* benchmark its vector is the original's (the cosine scan
costs the same whatever the values). They go into a memory-only embedding cache, so `build_index`
runs its real code path without encoding 100,000 documents on a shared 2-core machine; the dense
side's build time is therefore cache reads. Encoding throughput is measured apart
(`encoder_rates`, tool documents per second; `bench` prints it under its table).

Learning from usage (`usage_entries` > 0): backends that read a usage log get a second set of rows,
"NAME +usage", searched with a log of that many past searches (the natural queries, each credited
to a tool spread over the catalog). Their `build_s` is the index update when the log changes (the
catalog's own index is already built): what the first search after a conversation taught
something pays.
"""
from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from playground.bench.scorer import BenchRow, keyword_queries, natural_queries, scaled_catalog, source_tools
from playground.engine.evaluate import percentile
from playground.engine.search.backends import BENCH_BACKENDS, backend_from_spec
from playground.engine.search.base import SearchBackend
from playground.engine.search.embedding_cache import EmbeddingCache, embed_tools, embedding_key
from playground.engine.search.semantic import dense_side
from playground.engine.search.text import tool_document
from playground.engine.search.usage import UsageLog
from playground.engine.tools import Tool, ToolCatalog

_REPLICA_MARK = re.compile(r" \(replica \d+\)$")


def _original_key(tool: Tool) -> str:
    return _REPLICA_MARK.sub("", tool.description)


def prefill_embeddings(backend: SearchBackend, catalog: ToolCatalog, base: Sequence[Tool]) -> int:
    """Give every replica its original's vector in a memory-only cache; returns tools encoded for real."""
    semantic = dense_side(backend)
    if semantic is None:
        return 0
    base_in_catalog = [t for t in base if t.name in catalog]
    vectors, stats = embed_tools(base_in_catalog, semantic.encoder.encode, semantic.cache, model_id=semantic.encoder.model_id)
    by_text = {}
    for tool, vector in zip(base_in_catalog, vectors):
        by_text.setdefault(_original_key(tool), vector)
    memory = EmbeddingCache(None, semantic.encoder.dim)
    include_server = len({t.server for t in catalog.deferred}) > 1
    memory.put_many(
        {
            embedding_key(semantic.encoder.model_id, tool_document(t, include_server=include_server)): by_text[_original_key(t)]
            for t in catalog.deferred
            if _original_key(t) in by_text
        }
    )
    semantic.cache = memory
    return stats.encoded


def synthetic_usage(catalog: ToolCatalog, queries: Sequence[str], entries: int) -> UsageLog:
    """`entries` past searches: query i (cycled) credited to a tool spread over the catalog."""
    tools = catalog.deferred
    return UsageLog.from_pairs((queries[i % len(queries)], tools[(i * 7919) % len(tools)].name) for i in range(entries))


def _timed(backend: SearchBackend, catalog: ToolCatalog, queries: Sequence[str], repeat: int,
           usage: UsageLog | None = None) -> list[float]:
    """Per-query ms, best of `repeat` (shared machine: another process's stall should not count).
    Query vectors are cached by text, so only the first run of a query pays its encoding: the
    best-of is taken over runs that each encode — the cache is cleared between runs."""
    times: list[float] = []
    embedder = getattr(getattr(backend, "semantic", None) or backend, "embed_query", None)
    for query in queries:
        best = float("inf")
        for _ in range(repeat):
            if embedder is not None:
                embedder.clear()
            started = time.perf_counter()
            backend.search(query, catalog, max_results=5, usage=usage)
            best = min(best, time.perf_counter() - started)
        times.append(best * 1000)
    return times


def run(
    toolsets: Path,
    *,
    backends: Sequence[str] = BENCH_BACKENDS,
    sizes: Sequence[int] = (10_000, 100_000),
    queries: int = 40,
    repeat: int = 3,
    usage_entries: int = 0,
    progress: Callable[[str], None] = lambda message: None,
) -> list[BenchRow]:
    base = source_tools(toolsets)
    styles = {"keyword": keyword_queries(base, queries), "natural": natural_queries(toolsets, queries)}
    rows: list[BenchRow] = []
    for size in sizes:
        progress(f"{size} tools: building the catalog")
        catalog = scaled_catalog(base, size)
        _ = catalog.fingerprint  # computed once per catalog, outside the timings
        for name in backends:
            backend = backend_from_spec(name)
            prefill_embeddings(backend, catalog, base)
            progress(f"{size} tools: {name} index")
            started = time.perf_counter()
            index = backend.index_for(catalog)
            scan = getattr(getattr(index, "semantic", None), "scan", None)
            if scan is not None:  # a large catalog's int8 scanner, built in the background (vector_scan.py)
                scan.wait(600)
            build_s = time.perf_counter() - started
            for style, texts in styles.items():
                progress(f"{size} tools: {name} {style} queries")
                times = _timed(backend, catalog, texts, repeat)
                rows.append(
                    BenchRow(size, style, name, percentile(times, 50), percentile(times, 95), build_s, len(texts), sum(times) / len(times))
                )
            if usage_entries > 0 and backend.reads_usage:
                usage = synthetic_usage(catalog, styles["natural"], usage_entries)
                progress(f"{size} tools: {name} +usage index update")
                started = time.perf_counter()
                backend.index_for(catalog, usage)
                update_s = time.perf_counter() - started
                for style, texts in styles.items():
                    progress(f"{size} tools: {name} +usage {style} queries")
                    times = _timed(backend, catalog, texts, repeat, usage)
                    rows.append(BenchRow(size, style, f"{name} +usage", percentile(times, 50), percentile(times, 95), update_s,
                                         len(texts), sum(times) / len(times)))
            del backend
            gc.collect()
        del catalog
        gc.collect()
    return rows


def encoder_rates(toolsets: Path, backends: Sequence[str], count: int = 256) -> list[tuple[str, str, float]]:
    """(model id, runtime, tool documents encoded per second) for each distinct encoder the
    backends use: what a cold catalog costs once (the cache answers afterwards). Real tool
    documents of the toolsets, encoded without the cache, after a warm-up batch."""
    docs = [tool_document(t) for t in source_tools(toolsets)[:count]]
    rates: dict[int, tuple[str, str, float]] = {}
    for name in backends:
        backend = backend_from_spec(name)
        semantic = dense_side(backend)
        if semantic is None or id(semantic.encoder) in rates:
            continue
        encoder = semantic.encoder
        encoder.encode(docs[:8])
        started = time.perf_counter()
        encoder.encode(docs)
        rates[id(encoder)] = (encoder.model_id, encoder.runtime, round(len(docs) / (time.perf_counter() - started), 1))
    return list(rates.values())
