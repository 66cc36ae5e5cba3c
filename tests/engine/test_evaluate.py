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


def test_a_measure_is_rounded_once_where_it_is_shown():
    """The command line printed .3f of a value already rounded to four places, the page floatformat:3
    of the same: 0.51346 became 0.5135, then 0.513 on one and 0.514 on the other. Measures stay as
    measured; each display rounds the measure once, and they agree."""
    from decimal import ROUND_HALF_UP, Decimal

    from django.template.defaultfilters import floatformat

    from playground.engine.evaluate import EvalReport, QueryOutcome
    from playground.engine.search import quality

    hits = 25673  # of 50000: 0.51346
    outcomes = [QueryOutcome(id=str(i), ranked=(), recall_at_k=float(i < hits), recall_at_10=0.0, full_hit_at_k=False,
                             top_1=False, reciprocal_rank=0.0, latency_ms=1.0) for i in range(50000)]
    report = EvalReport(backend="b", tools=1, k=5, build_s=0.0, outcomes=outcomes)
    assert report.metrics()["recall_at_k"] == hits / 50000
    assert f"{report.metrics()['recall_at_k']:.3f}" == "0.513" == floatformat(report.metrics()["recall_at_k"], 3)
    assert report.to_dict()["recall_at_k"] == 0.5135  # the JSON's four places, from the measure
    assert Decimal("0.5135").quantize(Decimal("0.001"), ROUND_HALF_UP) == Decimal("0.514")  # what rounding twice gave

    row = quality.RunResult(toolset="t", backend="b", style="natural", split="all", queries=50000, tools=1,
                            metrics={"top@1": hits / 50000, "mrr": 0.0, "recall@5": hits / 50000, "recall@10": 0.0,
                                     "complete@5": 0.0}, p50_ms=1.0, p95_ms=1.0, build_s=0.0, index_mb=0.0)
    assert "| 0.513 |" in quality.format_table([row]) and "0.514" not in quality.format_table([row])
