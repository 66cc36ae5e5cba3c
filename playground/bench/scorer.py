"""Speed of the indexed Claude Code scorer against its plain transcription, at 1k / 10k / 100k tools.

Catalogs are built from the real catalogs in ../shared/toolsets: the tools of every folder
(interleaved so any prefix mixes sources), then replicas with a renamed server
(`mcp__<server>_r<N>__<tool>`) and a marked description, until the size is reached — so every tool
name and description is distinct and nothing is shared by accident. Two query styles:
- keyword: 2–4 terms drawn (seeded) from one tool's name parts and description words, one in four
  with a `+required` term — what a model writes in ToolSearch;
- natural: the labelled task statements of the same folders (long sentences with punctuation).
Both backends answer the same queries in the same run; rankings (names, scores and breakdowns)
must be identical. The plain transcription is slow at 100k, so it answers fewer queries there, and
it stops after a time budget per size and style (30 s by default, at least 3 queries).
Per-query time is the best of `repeat` runs for the indexed scorer (the machines are shared; a
stall of another process should not count) and one run for the transcription.
"""
from __future__ import annotations

import gc
import hashlib
import random
import re
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.engine.catalog_io import load_queries, load_tools
from playground.engine.evaluate import percentile
from playground.engine.search.base import SearchBackend
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.naive import NaiveKeywordBackend
from playground.engine.search.names import parse_tool_name
from playground.engine.tools import TOOL_NAME_PATTERN, Tool, ToolCatalog

SOURCE_FOLDERS = ("mcp-combined", "stabletoolbench", "bfcl", "metatool")
DEFAULT_SIZES = (1_000, 10_000, 100_000)
STYLES = ("keyword", "natural")
SEED = 20261202
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")


def source_tools(toolsets: Path) -> list[Tool]:
    """The tools of every source folder, interleaved round-robin (first occurrence of a name wins)."""
    lists = [load_tools(toolsets / folder / "catalog.jsonl") for folder in SOURCE_FOLDERS if (toolsets / folder / "catalog.jsonl").exists()]
    if not lists:
        raise FileNotFoundError(f"no catalog.jsonl under {toolsets} (folders {', '.join(SOURCE_FOLDERS)}); set TOOLSETS_DIR")
    seen: set[str] = set()
    mixed: list[Tool] = []
    for position in range(max(len(tools) for tools in lists)):
        for tools in lists:
            if position < len(tools) and tools[position].name not in seen:
                seen.add(tools[position].name)
                mixed.append(tools[position])
    return mixed


def _replica_name(tool: Tool, replica: int) -> str:
    server = tool.server or "tools"
    rest = tool.name[len(f"mcp__{server}__"):] if tool.name.startswith(f"mcp__{server}__") else tool.name
    name = f"mcp__{server}_r{replica}__{rest}"
    if len(name) > 64:
        name = name[:57] + "_" + hashlib.sha1(name.encode()).hexdigest()[:6]
    return name


def scaled_catalog(base: Sequence[Tool], size: int) -> ToolCatalog:
    """`size` tools: the base tools, then renamed replicas (deterministic)."""
    tools: list[Tool] = []
    names: set[str] = set()
    replica = 0
    while len(tools) < size:
        for tool in base:
            if len(tools) >= size:
                break
            if replica == 0:
                copy = tool
            else:
                name = _replica_name(tool, replica)
                if name in names or not TOOL_NAME_PATTERN.fullmatch(name):
                    continue
                copy = Tool(
                    name=name,
                    description=f"{tool.description} (replica {replica})",
                    input_schema=tool.input_schema,
                    is_mcp=True,
                    server=f"{tool.server or 'tools'}_r{replica}",
                )
            names.add(copy.name)
            tools.append(copy)
        replica += 1
    return ToolCatalog(tools)


def keyword_queries(base: Sequence[Tool], count: int, seed: int = SEED) -> list[str]:
    rng = random.Random(seed)
    queries: list[str] = []
    while len(queries) < count:
        tool = rng.choice(base)
        parts = [p for p in parse_tool_name(tool.name).parts if len(p) > 2 and p != "mcp"]
        words = _WORD.findall(tool.description.lower())
        pool = parts + words
        if len(pool) < 2:
            continue
        terms = rng.sample(pool, min(len(pool), rng.randint(2, 4)))
        if rng.random() < 0.25:
            terms[0] = "+" + terms[0]
        queries.append(" ".join(terms))
    return queries


def natural_queries(toolsets: Path, count: int, seed: int = SEED) -> list[str]:
    texts: list[str] = []
    for folder in SOURCE_FOLDERS:
        path = toolsets / folder / "queries.jsonl"
        if path.exists():
            texts += [q.query for q in load_queries(path)]
    if not texts:
        raise FileNotFoundError(f"no queries.jsonl under {toolsets}")
    rng = random.Random(seed)
    return [rng.choice(texts) for _ in range(count)]


@dataclass
class BenchRow:
    tools: int
    style: str
    backend: str
    p50_ms: float
    p95_ms: float
    build_s: float
    queries: int = 0
    mean_ms: float = 0.0
    index_mb: float | None = None
    identical: bool | None = None  # naive rows: did it rank exactly like claude-code on these queries
    speedup_p50: float | None = None  # naive rows: naive p50 ÷ claude-code p50

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        row: dict[str, Any] = {
            "tools": self.tools,
            "style": self.style,
            "backend": self.backend,
            "p50_ms": round(self.p50_ms, 3),
            "p95_ms": round(self.p95_ms, 3),
            "build_s": round(self.build_s, 3),
        }
        if details:
            row.update(
                queries=self.queries,
                mean_ms=round(self.mean_ms, 3),
                index_mb=None if self.index_mb is None else round(self.index_mb, 1),
                identical=self.identical,
                speedup_p50=None if self.speedup_p50 is None else round(self.speedup_p50, 1),
            )
        return row


@dataclass
class BenchConfig:
    sizes: Sequence[int] = DEFAULT_SIZES
    queries: int = 40  # per style, for claude-code
    naive_queries_at_100k: int = 8  # the transcription takes seconds per natural query there
    naive_budget_s: float = 30.0  # per size and style; the transcription stops there (after 3 queries)
    repeat: int = 3  # claude-code: best of N runs per query (the transcription runs once: it takes long enough)
    measure_memory: bool = True


def _timed(
    backend: SearchBackend,
    catalog: ToolCatalog,
    queries: Sequence[str],
    repeat: int = 1,
    budget_s: float | None = None,
    at_least: int = 3,
) -> tuple[list[float], list[Any]]:
    """Per-query milliseconds (the best of `repeat` runs: the machine is shared) and the rankings.
    With `budget_s`, stops once that much time is spent (after `at_least` queries)."""
    times: list[float] = []
    results: list[Any] = []
    spent_from = time.perf_counter()
    for query in queries:
        if budget_s is not None and len(times) >= at_least and time.perf_counter() - spent_from > budget_s:
            break
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            result = backend.search(query, catalog, max_results=5)
            best = min(best, time.perf_counter() - started)
        times.append(best * 1000)
        results.append([s.to_dict() for s in result.scored] or result.matches)
    return times, results


def index_memory_mb(backend: SearchBackend, catalog: ToolCatalog) -> float:
    """Bytes retained by one index build (tracemalloc sees Python objects and numpy buffers)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = backend.build_index(catalog)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del index
    return (after - before) / 1e6


def run_bench(toolsets: Path, config: BenchConfig, progress: Callable[[str], None] = lambda message: None) -> list[BenchRow]:
    base = source_tools(toolsets)
    styles = {
        "keyword": keyword_queries(base, config.queries),
        "natural": natural_queries(toolsets, config.queries),
    }
    rows: list[BenchRow] = []
    for size in config.sizes:
        progress(f"{size} tools: building the catalog")
        catalog = scaled_catalog(base, size)
        _ = catalog.fingerprint  # computed once per catalog, outside the timings
        fast, naive = ClaudeCodeKeywordBackend(), NaiveKeywordBackend()
        started = time.perf_counter()
        fast.index_for(catalog)
        build_s = time.perf_counter() - started
        memory = index_memory_mb(fast, catalog) if config.measure_memory else None
        naive_count = config.queries if size < 100_000 else min(config.queries, config.naive_queries_at_100k)
        for style, queries in styles.items():
            progress(f"{size} tools: {style} queries")
            fast_times, fast_results = _timed(fast, catalog, queries, config.repeat)
            naive_times, naive_results = _timed(naive, catalog, queries[:naive_count], budget_s=config.naive_budget_s)
            fast_p50 = percentile(fast_times, 50)
            rows.append(BenchRow(size, style, fast.name, fast_p50, percentile(fast_times, 95), build_s, len(queries), sum(fast_times) / len(fast_times), memory))
            naive_p50 = percentile(naive_times, 50)
            rows.append(
                BenchRow(
                    size,
                    style,
                    naive.name,
                    naive_p50,
                    percentile(naive_times, 95),
                    0.0,
                    len(naive_times),
                    sum(naive_times) / len(naive_times),
                    None,
                    identical=naive_results == fast_results[: len(naive_results)],
                    speedup_p50=naive_p50 / fast_p50 if fast_p50 else None,
                )
            )
        del catalog, fast, naive
        gc.collect()
    return rows


def format_table(rows: Sequence[BenchRow]) -> str:
    lines = [
        f"{'tools':>7}  {'style':<8} {'backend':<12} {'queries':>7} {'p50 ms':>9} {'p95 ms':>9} {'build s':>8} {'index MB':>9}  vs naive",
    ]
    for row in rows:
        extra = ""
        if row.backend == "naive":
            same = "identical rankings" if row.identical else "RANKINGS DIFFER"
            extra = f"{row.speedup_p50:.0f}x slower at p50, {same}" if row.speedup_p50 else same
        memory = f"{row.index_mb:9.1f}" if row.index_mb is not None else f"{'':>9}"
        build = f"{row.build_s:8.2f}" if row.backend != "naive" else f"{'-':>8}"
        lines.append(f"{row.tools:>7}  {row.style:<8} {row.backend:<12} {row.queries:>7} {row.p50_ms:9.3f} {row.p95_ms:9.3f} {build} {memory}  {extra}")
    return "\n".join(lines)

