from __future__ import annotations

import pytest

from playground.engine.catalog_io import LabelledQuery, load_catalog, load_queries
from playground.engine.evaluate import evaluate, score_query
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tools import ToolCatalog

from .conftest import mcp

QUERY = LabelledQuery(id="q", query="x", expected_tool_names=("a", "b"), equivalent_names={"b": ("b2",)})


def test_an_equivalent_name_counts_as_the_gold_tool():
    outcome = score_query(QUERY, ["z", "b2", "a"], k=2)
    assert outcome.recall_at_k == 0.5 and not outcome.full_hit_at_k
    assert outcome.recall_at_10 == 1.0
    assert outcome.reciprocal_rank == 0.5


def test_nothing_found_scores_zero():
    outcome = score_query(QUERY, [], k=5)
    assert (outcome.recall_at_k, outcome.recall_at_10, outcome.full_hit_at_k, outcome.reciprocal_rank) == (0.0, 0.0, False, 0.0)
    assert outcome.top_1 is False


def test_evaluate_averages_over_queries_and_times_each_search():
    catalog = ToolCatalog([mcp("slack", "post_message", "Send a message."), mcp("github", "create_issue", "Open an issue.")])
    queries = [
        LabelledQuery("1", "send a message", ("mcp__slack__post_message",)),
        LabelledQuery("2", "zebra", ("mcp__github__create_issue",)),
    ]
    report = evaluate(catalog, queries, ClaudeCodeKeywordBackend(), k=1)
    assert report.recall_at_k == 0.5 and report.full_hit_at_k == 0.5 and report.mrr == 0.5
    assert report.top_1 == 0.5 and report.metrics()["top_1"] == 0.5
    assert report.p50_ms > 0 and report.to_dict()["queries"][1] == {"id": "2", "ranked": []}
    with pytest.raises(ValueError):
        evaluate(catalog, queries, ClaudeCodeKeywordBackend(), k=0)


def test_the_claude_code_scorer_on_mcp_combined_finds_some_gold_tools(shared_toolsets):
    folder = shared_toolsets / "mcp-combined"
    report = evaluate(load_catalog(folder / "catalog.jsonl"), load_queries(folder / "queries.jsonl"), ClaudeCodeKeywordBackend(), k=5)
    assert len(report.outcomes) == 90
    assert 0.0 < report.recall_at_k <= report.recall_at_10 <= 1.0
