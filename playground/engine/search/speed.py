"""Speed benchmark of the retrieval backends at catalog sizes the toolsets do not reach (10k, 100k).

The catalog is every tool of the shared toolsets (≈5,800 distinct), replicated under renamed
servers (`<server>_r<n>`) until it has the wanted size: real text, real vocabulary, realistic
posting lengths. Queries are real labelled queries (natural language, or their keyword style).

Embeddings of replicas: a replica differs from its original only in the server suffix, so for
the *latency* benchmark its vector is the original's (the cosine scan costs the same whatever
the values); they are put into a memory-only embedding cache so `build_index` runs the real code
path without encoding 100k documents on a shared 2-core machine. Index build time is therefore
reported separately for BM25 (real) and for the dense side (cache reads only; real encoding
throughput is printed by `encode_rate`).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playground.engine.search import quality
from playground.engine.search.backends import get_backend
from playground.engine.tools import MCP_PREFIX, Tool, ToolCatalog

SOURCE_TOOLSETS = ("livemcpbench", "mcp-live", "stabletoolbench", "bfcl", "metatool")


def source_tools(root: Path | None = None) -> list[Tool]:
    from playground.engine.catalog_io import load_catalog, toolsets_dir

    base = root or toolsets_dir()
    seen: dict[str, Tool] = {}
    for name in SOURCE_TOOLSETS:
        path = base / name / "catalog.jsonl"
        if path.is_file():
            for tool in load_catalog(path):
                seen.setdefault(tool.name, tool)
    if not seen:
        raise ValueError(f"no toolsets found under {base} (set TOOLSETS_DIR)")
    return list(seen.values())


def replica(tool: Tool, n: int) -> Tool:
    if n == 0:
        return tool
    server = f"{tool.server or 'tools'}_r{n}"
    rest = tool.name[len(MCP_PREFIX):].partition("__")[2] if tool.name.startswith(MCP_PREFIX) else tool.name
    name = f"{MCP_PREFIX}{server}__{rest}"
    if len(name) > 64:
        name = f"{MCP_PREFIX}r{n}__{rest}"[:64]
    return Tool(name=name, description=tool.description, input_schema=tool.input_schema, is_mcp=True, server=server)


def synthetic_catalog(size: int, tools: Sequence[Tool]) -> tuple[ToolCatalog, list[int]]:
    """(catalog of `size` tools, index of each tool's original in `tools`)."""
    out: list[Tool] = []
    origin: list[int] = []
    names: set[str] = set()
    n = 0
    while len(out) < size:
        for i, tool in enumerate(tools):
            if len(out) >= size:
                break
            copy = replica(tool, n)
            if copy.name in names:
                continue
            names.add(copy.name)
            out.append(copy)
            origin.append(i)
        n += 1
    return ToolCatalog(out), origin


def benchmark_queries(count: int, style: str, root: Path | None = None) -> list[str]:
    queries: list[str] = []
    for name in ("livemcpbench", "stabletoolbench", "bfcl", "metatool"):
        try:
            _, labelled = quality.load_toolset(name, root)
        except ValueError:
            continue
        queries += [quality.styled_query(q.query, style) for q in quality.select_queries(labelled, "all", count // 4 + 1)]
    return [q for q in queries if q.strip()][:count]


def _prefill_embeddings(backend: Any, catalog: ToolCatalog, origin: list[int], tools: Sequence[Tool]) -> None:
    """Put replicas' vectors (their originals') into a memory-only cache the backend will read."""
    from playground.engine.search.embedding_cache import EmbeddingCache, embed_tools, embedding_key
    from playground.engine.search.text import tool_document

    semantic = getattr(backend, "semantic", None) if backend.name != "semantic" else backend
    if semantic is None:
        return
    originals, _ = embed_tools(tools, semantic.encoder.encode, semantic.cache, model_id=semantic.encoder.model_id)
    memory = EmbeddingCache(None, semantic.encoder.dim)
    memory.put_many(
        {
            embedding_key(semantic.encoder.model_id, tool_document(t)): originals[origin[i]]
            for i, t in enumerate(catalog.deferred)
        }
    )
    semantic.cache = memory


def run(
    backends: Sequence[str] = ("claude-code", "bm25", "hybrid"),
    sizes: Sequence[int] = (10_000, 100_000),
    *,
    queries: int = 200,
    styles: Sequence[str] = ("keyword", "natural"),
    root: Path | None = None,
    max_results: int = 5,
) -> list[dict[str, Any]]:
    tools = source_tools(root)
    rows: list[dict[str, Any]] = []
    texts = {style: benchmark_queries(queries, style, root) for style in styles}
    for size in sizes:
        catalog, origin = synthetic_catalog(size, tools)
        for name in backends:
            backend = get_backend(name)
            _prefill_embeddings(backend, catalog, origin, tools)
            started = time.perf_counter()
            backend.index_for(catalog)
            build_s = time.perf_counter() - started
            for style, qs in texts.items():
                for q in qs[:5]:
                    backend.search(q, catalog, max_results=max_results)  # warm caches (stems, query vectors are per text)
                latencies = []
                for q in qs:
                    t0 = time.perf_counter()
                    backend.search(q, catalog, max_results=max_results)
                    latencies.append((time.perf_counter() - t0) * 1000)
                rows.append(
                    {
                        "backend": name,
                        "tools": size,
                        "style": style,
                        "queries": len(qs),
                        "p50_ms": round(statistics.median(latencies), 3),
                        "p95_ms": round(quality.percentile(latencies, 0.95), 3),
                        "build_s": round(build_s, 2),
                    }
                )
    return rows


def encode_rate(count: int = 64, root: Path | None = None) -> float:
    """Tool documents encoded per second by the NumPy encoder (cold, no cache)."""
    from playground.engine.search.encoder import shared_encoder
    from playground.engine.search.text import tool_document

    encoder = shared_encoder()
    docs = [tool_document(t) for t in source_tools(root)[:count]]
    started = time.perf_counter()
    encoder.encode(docs)
    return round(len(docs) / (time.perf_counter() - started), 1)


def format_rows(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| backend | tools | style | queries | p50 ms | p95 ms | build s |", "|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['tools']:,} | {r['style']} | {r['queries']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {r['build_s']:.2f} |")
    return "\n".join(lines)

