"""Capabilities beside topics (capabilities.py): a request's implied generic need is answered by
the catalog's own best tool for it, placed at a calibrated slot below the topic tools."""
from __future__ import annotations

import pytest

from playground.engine.search import capabilities
from playground.engine.search.hybrid import HybridBackend, diversify_servers, named_server_tools
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp

SAVE_REQUEST = "List the open pull requests of my repository and put the list in /tmp/prs.md"


def test_capabilities_are_read_from_a_requests_structure_not_from_keywords():
    cues = capabilities.detect(SAVE_REQUEST)
    assert [cue.capability.key for cue in cues] == ["produce-file"] and "/tmp/prs.md" in cues[0].evidence
    assert [c.capability.key for c in capabilities.detect("Find the Bitcoin price and save it as a markdown file in my notes folder")] == ["produce-file"]
    # a keyword-style query has no structure to read
    assert capabilities.detect("pull requests repository list prs") == []
    assert capabilities.detect("Summarise the open pull requests of my repository for me") == []
    assert capabilities.detect(SAVE_REQUEST, frozenset({"locate"})) == []


def test_a_capability_slot_puts_the_catalogs_generic_tool_beside_the_topic_tools(encoder, embeddings_dir, small_catalog):
    without = HybridBackend(capability_rank=0).search(SAVE_REQUEST, small_catalog, max_results=3)
    assert "mcp__files__write_file" not in without.matches  # topic tools (github) fill the top 3
    result = HybridBackend(capability_rank=3).search(SAVE_REQUEST, small_catalog, max_results=3)
    # the topic tools ranked above keep their places; the slot is the third
    assert result.matches[:2] == without.matches[:2] and result.matches[2] == "mcp__files__write_file"
    placed = result.scored[2]
    capability = [c for c in placed.breakdown if c.term == "(capability)"]
    assert len(capability) == 1 and capability[0].rule == "capability slot 3: produce a file"
    assert "/tmp/prs.md" in capability[0].detail and "write content to a file" in capability[0].detail
    assert sum(c.points for c in placed.breakdown) == pytest.approx(placed.score, abs=2e-3)
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True)
    # the default slot is the fifth: a list of three is left as it was
    assert HybridBackend().search(SAVE_REQUEST, small_catalog, max_results=3).matches == without.matches
    assert HybridBackend().search(SAVE_REQUEST, small_catalog, max_results=5).matches[4] == "mcp__files__write_file"


def test_a_catalog_without_a_tool_for_the_capability_gets_no_slot(encoder, embeddings_dir):
    catalog = ToolCatalog([
        mcp("github", "list_pull_requests", "List open pull requests of a repository."),
        mcp("github", "create_issue", "Create a new issue in a GitHub repository."),
        mcp("weather", "get_forecast", "Get the weather forecast for a city."),
        mcp("mail", "send_email", "Send an e-mail message to one or more recipients."),
    ])
    result = HybridBackend(capability_rank=2).search(SAVE_REQUEST, catalog, max_results=4)
    assert all(c.term != "(capability)" for s in result.scored for c in s.breakdown)


def test_describe_query_names_the_capabilities_it_read(encoder):
    lines = HybridBackend().describe_query(SAVE_REQUEST)
    assert any(line.startswith("capabilities implied: produce a file") and "/tmp/prs.md" in line for line in lines)
    assert not any("capabilities" in line for line in HybridBackend(capability_rank=0).describe_query(SAVE_REQUEST))


def test_bad_capability_settings_are_refused():
    with pytest.raises(ValueError, match="capabilities"):
        HybridBackend(capabilities=["teleport"])
    with pytest.raises(ValueError, match="server_routing"):
        HybridBackend(server_routing="sometimes")


class _Index:
    """Just what the server-routing helpers read."""

    def __init__(self, catalog):
        from playground.engine.search.bm25 import BM25Backend

        self.bm25 = BM25Backend().build_index(catalog)
        self.server_stems = None


def test_a_single_need_request_routes_only_to_the_servers_it_names(small_catalog):
    from playground.engine.search.base import read_query

    index = _Index(small_catalog)
    named = named_server_tools(read_query("open issues on github about the login bug"), index)
    names = [t.name for t, hit in zip(index.bm25.tools, named) if hit]
    assert names and all(name.startswith("mcp__github__") for name in names)
    assert not named_server_tools(read_query("open issues about the login bug"), index).any()


def test_one_server_cannot_fill_the_top_k_when_another_has_a_good_answer(small_catalog):
    import numpy as np

    index = _Index(small_catalog)
    ids = [t.name for t in index.bm25.tools]
    fused = np.zeros(len(ids), dtype=np.float32)
    for name, score in [("mcp__github__create_issue", 1.0), ("mcp__github__list_pull_requests", 0.9), ("mcp__github__search_code", 0.8), ("mcp__gitlab__create_merge_request", 0.7)]:
        fused[ids.index(name)] = score
    order = [ids.index(n) for n in ("mcp__github__create_issue", "mcp__github__list_pull_requests", "mcp__github__search_code")]
    new_order, moved = diversify_servers(fused, order, index, 3, 0.8)
    assert [ids[i] for i in new_order] == ["mcp__github__create_issue", "mcp__github__list_pull_requests", "mcp__gitlab__create_merge_request"]
    assert moved == {ids.index("mcp__gitlab__create_merge_request"): 3}
    # unless its tools are the only good answers
    assert diversify_servers(fused, order, index, 3, 0.9) == (order, {})


def test_a_request_that_implies_a_computation_gets_the_catalogs_calculator_by_default(encoder, embeddings_dir):
    # Topic tools share the request's words; the calculator shares none of them ("market cap"
    # is the topic, "percentage change" the computation it implies).
    catalog = ToolCatalog([
        mcp("stocks", "get_stock_price", "Get the current stock price of a listed company."),
        mcp("stocks", "get_market_cap", "Get the market capitalization of a listed company."),
        mcp("stocks", "get_price_history", "Daily stock price history of a company."),
        mcp("stocks", "get_company_news", "Latest news articles about a listed company."),
        mcp("stocks", "get_dividends", "Dividend payments of a listed company's stock."),
        mcp("stocks", "get_analyst_ratings", "Analyst ratings and price targets for a company's stock."),
        mcp("calculator", "calculate", "Calculate the result of a mathematical expression."),
        mcp("weather", "get_forecast", "Get the weather forecast for a city."),
    ])
    request = "What is Nvidia's stock price today, and what is the percentage change of its market cap since last week?"
    assert [cue.capability.key for cue in capabilities.detect(request)] == ["current-time", "compute"]
    without = HybridBackend(capabilities=["produce-file"]).search(request, catalog, max_results=5)
    assert "mcp__calculator__calculate" not in without.matches
    result = HybridBackend().search(request, catalog, max_results=5)
    assert result.matches[:4] == without.matches[:4] and result.matches[4] == "mcp__calculator__calculate"
    capability = [c for c in result.scored[4].breakdown if c.term == "(capability)"]
    assert len(capability) == 1 and capability[0].rule == "capability slot 5: compute a value"
    # keyword-style queries carry no structure to read: unchanged
    keywords = "nvidia stock percentage change market"
    assert HybridBackend().search(keywords, catalog, max_results=5).matches == HybridBackend(capabilities=["produce-file"]).search(keywords, catalog, max_results=5).matches


def test_a_capability_slot_costs_no_encoding_once_the_index_has_the_capabilitys_vector(encoder, embeddings_dir, small_catalog, monkeypatch):
    """The capability's description is the catalog's business, not the request's: its vector is
    kept with the index, so a later request (with the query cache cleared, as the bench does, or
    evicted) encodes only its own texts."""
    backend = HybridBackend(capability_rank=3)
    first = backend.search(SAVE_REQUEST, small_catalog, max_results=3)
    assert any(c.term == "(capability)" for c in first.scored[2].breakdown)
    backend.semantic.embed_query.clear()
    encoded: list[str] = []
    real = type(encoder).encode

    def recording(self, texts, **options):
        encoded.extend(texts)
        return real(self, texts, **options)

    monkeypatch.setattr(type(encoder), "encode", recording)
    again = backend.search(SAVE_REQUEST, small_catalog, max_results=3)
    assert again.scored == first.scored
    assert encoded and not {cue.description for cue in capabilities.detect(SAVE_REQUEST)} & set(encoded)
