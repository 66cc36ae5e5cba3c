"""Search-quality evaluation: every backend × toolset × query style, on a fixed split.

What is measured (per query, then averaged; `../shared/toolsets/README.md` defines the scoring):
top-1 (the first result is a gold tool: what the model reads first), recall@1/3/5/10 (gold tools hit,
an `equivalent_names` alternative counts), complete@5/@10 (all gold tools hit — "full hit"), MRR@10
(1 / rank of the first gold tool in the top 10), per-query latency
p50/p95 (ms, the whole `search` call: query reading, query encoding, ranking, explanations), index
build time and the memory the index holds (tracemalloc, model weights excluded).

Query styles: "natural" — the query as given; "keyword" — `text.keyword_query` (stopwords, filler
and numbers dropped, the 5 longest distinct words kept in their order), a deterministic stand-in
for the short keyword queries a model writes.

Split: a query is in the development split when int(sha1(id)[:8], 16) % 10 < 3 (≈30 %), else in
the test split. Tuning uses only "dev"; reported figures use "test".

Learned from usage (`usage_from="dev"`): the development split's queries of the same toolset, in
the evaluated style, stand in for a log of past searches that led to their gold tools (usage.py),
and the test split is searched with that log. These figures answer "how well does search do once
the deployment has seen this kind of request before" — not the zero-shot question; they are
labelled "+usage" and reported apart.
"""
from __future__ import annotations

import hashlib
import json
import time
import tracemalloc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from playground.engine.catalog_io import LabelledQuery, load_catalog, load_queries, toolset_folder
from playground.engine.evaluate import RANKED_DEPTH, first_hit_rank, hits, percentile, reciprocal_rank
from playground.engine.search import text
from playground.engine.search.backends import DEFAULT_BACKEND, backend_from_spec
from playground.engine.search.base import SearchBackend
from playground.engine.search.embedding_cache import EmbedStats
from playground.engine.search.equivalence import SameOperation
from playground.engine.search.semantic import dense_side
from playground.engine.search.usage import UsageLog
from playground.engine.tools import ToolCatalog

STYLES: tuple[str, ...] = ("natural", "keyword")
SPLITS: tuple[str, ...] = ("test", "dev", "all")
K_VALUES: tuple[int, ...] = (1, 3, 5, 10)
DEV_BUCKETS = 3  # of 10
TOOLSETS: tuple[str, ...] = ("livemcpbench", "mcp-combined", "stabletoolbench", "bfcl", "metatool")
USAGE_SOURCES: tuple[str, ...] = ("none", "dev")

Progress = Callable[[float, str], None]

# Queries that must get "no match" (keyboard mashes, letters, digits and punctuation without a
# word): every backend's gate is measured on them beside the labelled queries, none of which may
# get an empty answer (language_gate.py). Not "ffffff": it is a colour in schemas (a lexical match).
NONSENSE_QUERIES: tuple[str, ...] = (
    "zzzz qqqq", "asdfgh jkl", "xqzv wplk", "qwertyuiop", "blorp fnord zxcv", "jjjjjjj kkkkk", "lkjhg fdsa poiu",
    "zxcvbnm qwerty", "ghjk tyui", "aaaa bbbb cccc", "xyzzy plugh", "mmmmm", "gggggg hhhh kkkk", "wxqv jzkq",
    "!!!! ????", "12345 67890", "vbnm, hjkl; uiop", "pfft zzt grr", "the of and",
)


def split_of(query_id: str) -> str:
    bucket = int(hashlib.sha1(query_id.encode("utf-8")).hexdigest()[:8], 16) % 10
    return "dev" if bucket < DEV_BUCKETS else "test"


def styled_query(query: str, style: str) -> str:
    if style == "natural":
        return query
    if style == "keyword":
        return text.keyword_query(query)
    raise ValueError(f"unknown query style {style!r} (styles: {', '.join(STYLES)})")


def labelled_query(item: LabelledQuery | Mapping[str, Any]) -> LabelledQuery:
    """A labelled query from a queries.jsonl record (dict) or an already loaded one."""
    if isinstance(item, LabelledQuery):
        return item
    return LabelledQuery(
        id=str(item["id"]),
        query=item["query"],
        expected_tool_names=tuple(item["expected_tool_names"]),
        equivalent_names={k: tuple(v) for k, v in (item.get("equivalent_names") or {}).items()},
    )


def score_query(top: Sequence[str], query: LabelledQuery, same_operation: SameOperation | None = None) -> dict[str, float]:
    """recall@k, complete@k for k in K_VALUES and the reciprocal rank, for one ranked list
    (the same counting as the CLI's `eval`: `evaluate.hits` and `evaluate.reciprocal_rank`).
    With `same_operation`, also `same_op_recall@k` and `same_op_complete@k`: a gold tool also
    counts as found when a same-operation tool of another server is (`equivalence.py`) — reported
    beside the strict figures, never instead of them."""
    gold = len(query.expected_tool_names)
    scores: dict[str, float] = {}
    for k in K_VALUES:
        hit = hits(query, top[:k])
        scores[f"recall@{k}"] = hit / gold
        scores[f"complete@{k}"] = float(hit == gold)
    scores["rr"] = reciprocal_rank(query, top[:RANKED_DEPTH])
    # top-1: the first result is a gold tool — what the model reads first (recall@1 divides by the gold count)
    scores["top@1"] = float(first_hit_rank(query, top[:1]) == 1)
    if same_operation is not None:
        widened = [
            accepted.union(*(same_operation.others(name) for name in accepted))
            for accepted in (query.accepted_names(g) for g in query.expected_tool_names)
        ]
        for k in K_VALUES:
            shown = set(top[:k])
            hit = sum(1 for accepted in widened if accepted & shown)
            scores[f"same_op_recall@{k}"] = hit / gold
            scores[f"same_op_complete@{k}"] = float(hit == gold)
    return scores


@dataclass
class RunResult:
    toolset: str
    backend: str
    style: str
    split: str
    queries: int
    tools: int
    metrics: dict[str, float]
    p50_ms: float
    p95_ms: float
    build_s: float
    index_mb: float
    notes: str = ""
    # Per query, in the split's order: id, text, gold, recall@5 and the first gold tool's rank (1–10,
    # else None) — what `default_gaps` compares backends by. Not stored with the row (`to_dict`).
    per_query: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row.pop("per_query")
        return row


def index_notes(index: Any) -> list[str]:
    """What an index says about its build: a dense side's embeddings (encoded now / from the
    cache), or an index that describes itself (the postgres backend: the rows its sync wrote)."""
    describe = getattr(index, "describe", None)
    if callable(describe):
        return [describe()]
    stats = getattr(index, "stats", None) or getattr(getattr(index, "semantic", None), "stats", None)
    if isinstance(stats, EmbedStats):
        return [f"embeddings: {stats.encoded} encoded, {stats.reused} from cache"]
    return []


def evaluate_backend(
    backend: SearchBackend,
    catalog: ToolCatalog,
    queries: Iterable[Any],
    *,
    style: str = "natural",
    toolset: str = "",
    split: str = "all",
    progress: Progress | None = None,
    usage: UsageLog | None = None,
) -> RunResult:
    labelled = [labelled_query(q) for q in queries]
    tracemalloc.start()
    started = time.perf_counter()
    index = backend.index_for(catalog, usage)
    build_s = time.perf_counter() - started
    index_mb = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    notes = []
    notes.extend(index_notes(index))
    dense = dense_side(backend)
    if dense is not None:  # which vectors these figures are of (int8 and float differ a little)
        notes.append(f"encoder: {dense.encoder.model_id} on {dense.encoder.runtime}")
    if getattr(backend, "degraded_reason", ""):
        notes.append(backend.degraded_reason)
    learned = bool(usage) and backend.reads_usage
    if learned:
        notes.append(f"learned from usage: {usage.entries} past queries for {usage.tools} tools")

    # Query vectors are cached by text; another backend's run must not make this one look fast.
    embedder = getattr(getattr(backend, "semantic", None) or backend, "embed_query", None)
    if embedder is not None and hasattr(embedder, "clear"):
        embedder.clear()
    same_operation = SameOperation(catalog.deferred)
    if same_operation:
        notes.append(f"same operation on other servers: {len(same_operation)} tools in {len(same_operation.groups())} groups")
    totals: dict[str, float] = {}
    latencies: list[float] = []
    per_query: list[dict[str, Any]] = []
    for n, query in enumerate(labelled, start=1):
        text_ = styled_query(query.query, style)
        started = time.perf_counter()
        result = backend.search(text_, catalog, max_results=10, usage=usage)
        latencies.append((time.perf_counter() - started) * 1000)
        scores = score_query(result.matches, query, same_operation)
        for key, value in scores.items():
            totals[key] = totals.get(key, 0.0) + value
        per_query.append({"id": query.id, "query": text_, "gold": list(query.expected_tool_names),
                          "recall@5": scores["recall@5"], "gold_rank": first_hit_rank(query, result.matches[:RANKED_DEPTH])})
        if progress and (n % 25 == 0 or n == len(labelled)):
            progress(n / len(labelled), f"{toolset} {backend.name} {style}: {n}/{len(labelled)}")
        totals["empty"] = totals.get("empty", 0.0) + (not result.matches)
    count = max(1, len(labelled))
    # As measured: rounded once where shown (the table's three places, the page's floatformat), not here too.
    metrics = {("mrr" if key == "rr" else key): value / count for key, value in totals.items()}
    metrics["empty"] = totals.get("empty", 0.0) / count  # share of labelled queries answered with nothing
    metrics["nonsense_no_match"] = nonsense_no_match(backend, catalog, usage)
    return RunResult(
        toolset=toolset,
        backend=f"{backend.name} +usage" if learned else backend.name,
        style=style,
        split=split,
        queries=len(labelled),
        tools=len(catalog.deferred),
        metrics=metrics,
        p50_ms=round(percentile(latencies, 50), 3),
        p95_ms=round(percentile(latencies, 95), 3),
        build_s=round(build_s, 3),
        index_mb=round(index_mb, 2),
        notes="; ".join(notes),
        per_query=per_query,
    )



def nonsense_no_match(backend: SearchBackend, catalog: ToolCatalog, usage: UsageLog | None = None) -> float:
    """The share of `NONSENSE_QUERIES` the backend answers with "no match" over `catalog`."""
    return sum(not backend.search(q, catalog, max_results=10, usage=usage).matches for q in NONSENSE_QUERIES) / len(NONSENSE_QUERIES)


def load_toolset(name: str, root: Path | None = None) -> tuple[ToolCatalog, list[LabelledQuery]]:
    folder = toolset_folder(name, root)
    if not (folder / "catalog.jsonl").is_file():
        raise ValueError(f"toolset {name!r} not found in {folder.parent} (set TOOLSETS_DIR)")
    if not (folder / "queries.jsonl").is_file():
        raise ValueError(f"toolset {name!r} has no queries.jsonl")
    return load_catalog(folder / "catalog.jsonl"), load_queries(folder / "queries.jsonl")


def usage_from_queries(queries: Iterable[LabelledQuery], style: str) -> UsageLog:
    """A usage log standing in for a deployment's history: each query (in `style`) led to each of
    its gold tools."""
    return UsageLog.from_pairs(
        (styled_query(q.query, style), tool) for q in queries for tool in q.expected_tool_names
    )


def select_queries(queries: Sequence[LabelledQuery], split: str, limit: int | None = None) -> list[LabelledQuery]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (splits: {', '.join(SPLITS)})")
    chosen = [q for q in queries if split == "all" or split_of(q.id) == split]
    if limit is not None and limit < len(chosen):
        # An even, deterministic sample across the file (files are grouped by category).
        step = len(chosen) / limit
        chosen = [chosen[int(i * step)] for i in range(limit)]
    return chosen


def run_suite(
    toolsets: Sequence[str],
    backends: Sequence[str],
    styles: Sequence[str] = STYLES,
    *,
    split: str = "test",
    limit: int | None = None,
    root: Path | None = None,
    progress: Progress | None = None,
    backend_options: dict[str, dict[str, Any]] | None = None,
    registry: Mapping[str, str] | None = None,
    usage_from: str = "none",
    load: Callable[[str], tuple[ToolCatalog, list[LabelledQuery]]] | None = None,
) -> list[RunResult]:
    """Every toolset × backend × style. Backends are built once and reused across toolsets.
    `usage_from="dev"`: search the test split with the dev split as the log of past searches.
    `load`: how a toolset name becomes (catalog, labelled queries) — default the shared toolsets'
    folder (the web app also passes a profile's own labelled set)."""
    for style in styles:
        styled_query("", style)  # validate early
    if usage_from not in USAGE_SOURCES:
        raise ValueError(f"unknown usage source {usage_from!r} (sources: {', '.join(USAGE_SOURCES)})")
    if usage_from == "dev" and split != "test":
        raise ValueError("usage from the dev split is only measured on the test split (a query must not find itself in the log)")
    instances = {
        name: backend_from_spec(name, dict(registry) if registry else None, **((backend_options or {}).get(name) or {}))
        for name in backends
    }
    steps = max(1, len(toolsets) * len(backends) * len(styles))
    done = 0
    results: list[RunResult] = []
    for toolset in toolsets:
        catalog, queries = load(toolset) if load is not None else load_toolset(toolset, root)
        chosen = select_queries(queries, split, limit)
        # One log per style (the dev queries in that style), shared by every backend.
        dev = select_queries(queries, "dev") if usage_from == "dev" else []
        logs = {style: usage_from_queries(dev, style) for style in styles} if dev else {}
        for backend in instances.values():
            for style in styles:
                usage = logs.get(style)
                def step_progress(fraction: float, message: str, _done: int = done) -> None:
                    if progress:
                        progress((_done + fraction) / steps, message)

                result = evaluate_backend(backend, catalog, chosen, style=style, toolset=toolset, split=split,
                                          progress=step_progress, usage=usage)
                first = next((r for r in results if r.toolset == toolset and r.backend == result.backend), None)
                if first is not None and not usage:  # the index was built for the first style; report that build
                    result.build_s, result.index_mb, result.notes = first.build_s, first.index_mb, first.notes
                results.append(result)
                done += 1
    return results


GAP_METRIC = "recall@5"
GAP_EXAMPLES = 3  # queries shown per gap: where the other backend gains most over the default
BOOTSTRAP_RESAMPLES = 2000


@dataclass
class DefaultGap:
    """One place where a backend beats the default on `GAP_METRIC`: by how much, on how many
    queries each way, whether the difference is outside the noise of this many queries (a paired
    bootstrap 95 % interval of the per-query difference), and the queries that make it."""

    toolset: str
    style: str
    split: str
    default: str
    leader: str
    default_value: float
    leader_value: float
    queries: int
    better: int  # queries where the leader finds more gold tools in its top 5
    worse: int  # … and where it finds fewer
    interval: tuple[float, float]  # paired 95 % interval of leader − default
    examples: list[dict[str, Any]]  # {query, gold, default_found, leader_found, default_rank, leader_rank}

    @property
    def difference(self) -> float:
        return round(self.leader_value - self.default_value, 4)

    @property
    def within_noise(self) -> bool:
        return self.interval[0] <= 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "interval": list(self.interval), "difference": self.difference, "within_noise": self.within_noise}


def usage_free_name(backend: str) -> str:
    return backend.removesuffix(" +usage")


def default_gaps(results: Sequence[RunResult], default: str = DEFAULT_BACKEND) -> list[DefaultGap]:
    """Every toolset × style × split of `results` where another backend's `GAP_METRIC` is higher
    than the default's, compared like with like (a "+usage" row against the default's "+usage"
    row). Empty when the default wins everywhere or is not among the results."""
    gaps: list[DefaultGap] = []
    for row in results:
        if usage_free_name(row.backend) != default:
            continue
        learned = row.backend != default
        rivals = [r for r in results if (r.toolset, r.style, r.split) == (row.toolset, row.style, row.split)
                  and usage_free_name(r.backend) != default and r.backend.endswith(" +usage") == learned
                  and r.metrics.get(GAP_METRIC, 0.0) > row.metrics.get(GAP_METRIC, 0.0)]
        ours = {q["id"]: q for q in row.per_query}
        for rival in sorted(rivals, key=lambda r: -r.metrics[GAP_METRIC]):
            pairs = [(ours[q["id"]], q) for q in rival.per_query if q["id"] in ours]
            diff = np.array([theirs[GAP_METRIC] - mine[GAP_METRIC] for mine, theirs in pairs], dtype=float)
            if len(diff):
                rng = np.random.default_rng(0)  # the same interval every time for the same figures
                means = diff[rng.integers(0, len(diff), size=(BOOTSTRAP_RESAMPLES, len(diff)))].mean(axis=1)
                interval = (round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4))
            else:
                interval = (0.0, 0.0)
            order = sorted(range(len(pairs)), key=lambda i: (-diff[i], pairs[i][0]["id"]))
            examples = [{"query": pairs[i][1]["query"], "gold": pairs[i][1]["gold"],
                         "default_found": _found(pairs[i][0]), "leader_found": _found(pairs[i][1]),
                         "default_rank": pairs[i][0]["gold_rank"], "leader_rank": pairs[i][1]["gold_rank"]}
                        for i in order[:GAP_EXAMPLES] if diff[i] > 0]
            gaps.append(DefaultGap(
                toolset=row.toolset, style=row.style, split=row.split, default=row.backend, leader=rival.backend,
                default_value=row.metrics.get(GAP_METRIC, 0.0), leader_value=rival.metrics[GAP_METRIC], queries=len(pairs),
                better=int((diff > 0).sum()), worse=int((diff < 0).sum()), interval=interval, examples=examples,
            ))
    return gaps


def describe_gap(gap: DefaultGap | Mapping[str, Any]) -> str:
    """One plain sentence: where, by how much, how many queries each way, and whether it is noise."""
    g = gap.to_dict() if isinstance(gap, DefaultGap) else gap
    low, high = g["interval"]
    verdict = ("within the noise of this many queries (the interval includes no difference)" if g["within_noise"]
               else "a real difference on this split (the interval excludes no difference)")
    return (f"{g['toolset']}, {g['style']} queries: {g['leader']} {g['leader_value']:.3f} against the default "
            f"{g['default']} {g['default_value']:.3f} ({g['difference']:+.3f} {GAP_METRIC}); it finds more gold tools on "
            f"{g['better']} of {g['queries']} queries and fewer on {g['worse']}; paired 95 % interval "
            f"{low:+.3f} to {high:+.3f}: {verdict}")


def format_gaps(results: Sequence[RunResult], default: str = DEFAULT_BACKEND) -> str:
    """The CLI's plain statement of where the default is not the best (or that it is everywhere)."""
    if not any(usage_free_name(r.backend) == default for r in results):
        return f"The default backend ({default}) is not in this run: no comparison with it."
    gaps = default_gaps(results, default)
    if not gaps:
        return f"The default backend ({default}) has the best {GAP_METRIC} on every toolset and style of this run."
    lines = [f"Where the default backend ({default}) is not the best ({GAP_METRIC}):"]
    for gap in gaps:
        lines.append(f"- {describe_gap(gap)}")
        for example in gap.examples:
            gold = len(example["gold"])
            lines.append(f"    {gap.leader} {example['leader_found']} of {gold} (first {_rank(example['leader_rank'])}), "
                         f"{gap.default} {example['default_found']} of {gold} (first {_rank(example['default_rank'])}): "
                         f"{_shorten(example['query'])} → {', '.join(example['gold'])}")
    return "\n".join(lines)


def _found(query: Mapping[str, Any]) -> int:
    """Gold tools found in the top 5 of one query's entry."""
    return round(query[GAP_METRIC] * len(query["gold"]))


def _rank(rank: int | None) -> str:
    return f"#{rank}" if rank else f">{RANKED_DEPTH}"


def _shorten(query: str, limit: int = 100) -> str:
    return query if len(query) <= limit else query[: limit - 1] + "…"


TABLE_COLUMNS = ("top@1", "mrr", "recall@5", "recall@10", "complete@5")


def format_table(results: Sequence[RunResult]) -> str:
    """A Markdown table: one row per toolset × style × backend."""
    header = ("| toolset | style | backend | queries | top-1 | MRR@10 | recall@5 | recall@5 same-op | recall@10 | full@5 | p50 ms "
              "| p95 ms | build s | index MB |")
    lines = [header, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        m = r.metrics
        same_op = m.get("same_op_recall@5", m["recall@5"])
        lines.append(
            f"| {r.toolset} | {r.style} | {r.backend} | {r.queries} | {m.get('top@1', 0.0):.3f} | {m['mrr']:.3f} | {m['recall@5']:.3f} | "
            f"{same_op:.3f} | {m['recall@10']:.3f} | {m['complete@5']:.3f} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | {r.build_s:.2f} | {r.index_mb:.1f} |"
        )
    return "\n".join(lines)


def format_answer_rates(results: Sequence[RunResult]) -> str:
    """Per row: how many labelled queries got no answer at all (should be none), and how many
    of the nonsense queries got "no match" (should be all)."""
    lines = ["| toolset | style | backend | labelled queries answered with nothing | nonsense queries answered \"no match\" |", "|---|---|---|---:|---:|"]
    for r in results:
        empty = round(r.metrics.get("empty", 0.0) * r.queries)
        nonsense = round(r.metrics.get("nonsense_no_match", 0.0) * len(NONSENSE_QUERIES))
        lines.append(f"| {r.toolset} | {r.style} | {r.backend} | {empty} of {r.queries} | {nonsense} of {len(NONSENSE_QUERIES)} |")
    return "\n".join(lines)


def results_json(results: Sequence[RunResult], **meta: Any) -> str:
    return json.dumps({**meta, "results": [r.to_dict() for r in results]}, indent=2)
