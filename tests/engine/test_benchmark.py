from __future__ import annotations

from playground.bench.scorer import BenchConfig, format_table, keyword_queries, run_bench, scaled_catalog, source_tools
from playground.engine.search.base import read_query
from playground.engine.tools import TOOL_NAME_PATTERN

from .conftest import mcp


def test_scaled_catalogs_reach_the_size_with_distinct_valid_names_and_descriptions():
    base = [mcp("srv", f"tool_{i}", f"does thing {i}") for i in range(7)]
    catalog = scaled_catalog(base, 30)
    assert len(catalog) == 30
    assert all(TOOL_NAME_PATTERN.fullmatch(t.name) for t in catalog)
    assert len({t.description for t in catalog}) == 30
    assert catalog.tools[7].name == "mcp__srv_r1__tool_0"


def test_keyword_queries_have_two_to_four_terms_and_are_deterministic():
    base = [mcp("github", "create_issue", "Create a new issue in a repository."), mcp("slack", "post_message", "Send a message to a channel.")]
    queries = keyword_queries(base, 20)
    assert queries == keyword_queries(base, 20)
    assert all(2 <= len(read_query(q).scoring_terms) <= 4 for q in queries)


def test_a_small_bench_reports_both_backends_and_identical_rankings(shared_toolsets):
    rows = run_bench(shared_toolsets, BenchConfig(sizes=[150], queries=3, repeat=1, measure_memory=True))
    assert len(source_tools(shared_toolsets)) > 5000
    naive = [r for r in rows if r.backend == "naive"]
    assert len(naive) == 2 and all(r.identical for r in naive)
    assert all(r.index_mb and r.index_mb > 0 for r in rows if r.backend == "claude-code")
    assert "identical rankings" in format_table(rows)
