from __future__ import annotations


import pytest

from playground.engine.catalog_io import LabelledQuery
from playground.engine.search import quality
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend
from playground.engine.tools import Tool, ToolCatalog
from tests.toolset_fixtures import write_toy_toolsets


class FixedRanking(SearchBackend):
    """Always the same ranking: makes the metrics checkable by hand."""

    name = "fixed"

    def __init__(self, ranking, **options):
        super().__init__(**options)
        self.ranking = ranking

    def build_index(self, catalog):
        return None

    def rank(self, reading: QueryReading, index, catalog, max_results):
        return [ScoredTool(name, 10.0 - i) for i, name in enumerate(self.ranking[:max_results])]


def toy_catalog() -> ToolCatalog:
    return ToolCatalog(Tool(name=f"mcp__s__t{i}", description=f"tool {i}", is_mcp=True) for i in range(12))


def test_score_query_counts_equivalents_recall_completeness_and_rr():
    q = LabelledQuery(id="q", query="x", expected_tool_names=("a", "b"), equivalent_names={"b": ("b2",)})
    scores = quality.score_query(["z", "b2", "y", "x", "w", "v", "a"], q)
    assert scores["recall@1"] == 0.0 and scores["recall@3"] == 0.5 and scores["recall@5"] == 0.5
    assert scores["recall@10"] == 1.0 and scores["complete@10"] == 1.0 and scores["complete@5"] == 0.0
    assert scores["rr"] == 0.5
    assert scores["top@1"] == 0.0  # the first result is no gold tool


def test_top_1_counts_an_accepted_alternative_in_first_place_whatever_the_gold_count():
    q = LabelledQuery(id="q", query="x", expected_tool_names=("a", "b"), equivalent_names={"b": ("b2",)})
    scores = quality.score_query(["b2", "z", "a"], q)
    assert scores["top@1"] == 1.0 and scores["recall@1"] == 0.5  # recall@1 divides by the two gold tools


def test_evaluate_backend_averages_over_queries():
    catalog = toy_catalog()
    names = [t.name for t in catalog]
    backend = FixedRanking(names)
    queries = [
        {"id": "1", "query": "anything", "expected_tool_names": [names[0]]},  # rank 1
        {"id": "2", "query": "anything", "expected_tool_names": [names[5], names[11]]},  # rank 6, missing
    ]
    result = quality.evaluate_backend(backend, catalog, queries, toolset="toy")
    assert result.metrics["recall@1"] == 0.5
    assert result.metrics["top@1"] == 0.5
    assert result.metrics["recall@5"] == 0.5
    assert result.metrics["recall@10"] == pytest.approx((1 + 0.5) / 2)
    assert result.metrics["complete@10"] == 0.5
    assert result.metrics["mrr"] == pytest.approx((1 + 1 / 6) / 2, abs=1e-4)
    assert result.queries == 2 and result.tools == 12 and result.p95_ms >= result.p50_ms >= 0
    # a backend that answers everything: no empty answer, and no "no match" for nonsense either
    assert result.metrics["empty"] == 0.0 and result.metrics["nonsense_no_match"] == 0.0


def test_split_is_fixed_by_query_id_and_about_thirty_percent_dev():
    ids = [f"query-{i}" for i in range(2000)]
    dev = [i for i in ids if quality.split_of(i) == "dev"]
    assert 0.25 < len(dev) / len(ids) < 0.35
    assert [quality.split_of(i) for i in ids] == [quality.split_of(i) for i in ids]
    labelled = [LabelledQuery(id=i, query="q", expected_tool_names=("g",)) for i in ids]
    assert len(quality.select_queries(labelled, "dev")) + len(quality.select_queries(labelled, "test")) == len(ids)
    assert len(quality.select_queries(labelled, "all", limit=7)) == 7
    with pytest.raises(ValueError, match="unknown split"):
        quality.select_queries(labelled, "train")


def test_styles():
    assert quality.styled_query("Find the weather in Paris", "natural") == "Find the weather in Paris"
    assert quality.styled_query("Find the weather in Paris", "keyword") == "weather paris"
    with pytest.raises(ValueError, match="unknown query style"):
        quality.styled_query("x", "shouting")


@pytest.fixture
def toy_toolsets(tmp_path):
    return write_toy_toolsets(tmp_path)


def test_run_suite_covers_every_backend_and_style_with_progress(toy_toolsets):
    seen: list[float] = []
    results = quality.run_suite(["toy"], ["claude-code", "bm25"], split="all", root=toy_toolsets, progress=lambda f, m: seen.append(f))
    assert [(r.backend, r.style) for r in results] == [("claude-code", "natural"), ("claude-code", "keyword"), ("bm25", "natural"), ("bm25", "keyword")]
    assert all(r.queries == 12 for r in results)
    bm25_natural = results[2]
    assert bm25_natural.metrics["recall@1"] == 1.0
    assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    table = quality.format_table(results)
    assert table.count("\n") == 1 + len(results) and "| toy | natural | bm25 | 12 | 1.000 |" in table
    with pytest.raises(ValueError, match="not found"):
        quality.run_suite(["nope"], ["bm25"], root=toy_toolsets)


def test_notes_name_the_encoder_whose_vectors_were_scored(toy_toolsets, encoder, embeddings_dir):
    results = quality.run_suite(["toy"], ["bm25", "hybrid", 'semantic:runtime="onnx"'], split="all", styles=["natural"], root=toy_toolsets)
    notes = {r.backend: r.notes for r in results}
    assert "encoder:" not in notes["bm25"]
    assert f"encoder: {encoder.model_id} on {encoder.runtime}" in notes["hybrid"]
    assert "encoder: sentence-transformers/all-MiniLM-L6-v2 on onnx" in notes['semantic:runtime="onnx"']
