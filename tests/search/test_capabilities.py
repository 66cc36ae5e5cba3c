"""Capabilities beside topics (capabilities.py): a request's implied generic need is answered by
the catalog's own best tool for it, placed at a calibrated slot below the topic tools."""
from __future__ import annotations

import pytest

from playground.engine.search import capabilities
from playground.engine.search.hybrid import HybridBackend
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


# -- chains: a document is made in steps (create, add to it, save it) by one server ------------------

PPT_REQUEST = "Analyze ACME's stock prices for the past year and summarize them in a PPT in /root/ppt/acme.pptx."


@pytest.fixture
def slides_catalog() -> ToolCatalog:
    return ToolCatalog([
        mcp("stocks", "get_historical_prices", "Get the historical daily prices of a stock ticker for a date range."),
        mcp("stocks", "get_income_statement", "Get the income statement of a company by its stock ticker."),
        mcp("stocks", "get_news", "Get the latest news about a stock ticker."),
        mcp("charts", "generate_line_chart", "Generate a line chart image from a series of data points."),
        mcp("slides", "create_presentation", "Create a new PowerPoint presentation."),
        mcp("slides", "add_slide", "Add a new slide with a title and body text to the presentation."),
        mcp("slides", "save_presentation", "Save the presentation to a .pptx file on disk."),
        # about the same kind of document, but no step of making one
        mcp("pptinfo", "get_pptx_info", "Get information about the slides of a PowerPoint presentation file."),
        mcp("files", "read_file", "Read the complete contents of a file."),
        mcp("weather", "get_forecast", "Get the weather forecast for a city."),
    ])


def test_a_document_type_is_read_with_the_later_steps_of_making_it():
    (cue,) = capabilities.detect(PPT_REQUEST)
    assert cue.description == "create a new PowerPoint presentation"
    assert cue.chain == ("add a slide with a title and text to the presentation", "save the presentation to a file")
    (plain,) = capabilities.detect(SAVE_REQUEST)
    assert plain.chain == ()  # a text file is written in one step
    # a producing verb before a file name (no folder) implies the file too; reading one does not
    named = capabilities.detect("Generate a well-formatted PDF report titled market_report.pdf summarizing the week's trends")
    assert [c.capability.key for c in named] == ["produce-file"] and named[0].description == "create a new PDF document"
    assert capabilities.detect("Tell me what the report titled market_report.pdf says about the trends") == []


def test_a_chain_step_takes_the_place_of_a_tool_about_the_document_that_is_no_step(encoder, embeddings_dir, slides_catalog):
    without = HybridBackend(capability_chain="off").search(PPT_REQUEST, slides_catalog, max_results=5)
    assert "mcp__slides__save_presentation" not in without.matches and "mcp__pptinfo__get_pptx_info" in without.matches
    result = HybridBackend().search(PPT_REQUEST, slides_catalog, max_results=6)
    top = result.matches[:5]
    # create (the slot) and save (the step the request scores best) are in; the .pptx reader made room
    assert {"mcp__slides__create_presentation", "mcp__slides__save_presentation"} <= set(top)
    assert "mcp__pptinfo__get_pptx_info" not in top and result.matches[5] == "mcp__pptinfo__get_pptx_info"
    # the topic tools keep their places
    assert [name for name in top if name.startswith("mcp__stocks__")] == [name for name in without.matches if name.startswith("mcp__stocks__")]
    step = result.scored[result.matches.index("mcp__slides__save_presentation")]
    (line,) = [c for c in step.breakdown if c.term == "(capability)"]
    assert line.rule.endswith("produce a file, step 3 of 3")
    assert "save the presentation to a file" in line.detail and "in place of mcp__pptinfo__get_pptx_info" in line.detail
    demoted = result.scored[5]
    assert [c.term for c in demoted.breakdown][-1] == "(chain)"
    for scored in result.scored:
        assert sum(c.points for c in scored.breakdown) == pytest.approx(scored.score, abs=2e-3)
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True)


def test_chain_steps_are_answered_only_among_the_first_steps_server(encoder, embeddings_dir, slides_catalog):
    # another server's tool says "save the presentation" best, but a document is saved by its own server
    catalog = ToolCatalog([*slides_catalog.deferred, mcp("exporter", "save_presentation_file", "Save the presentation to a file.")])
    result = HybridBackend().search(PPT_REQUEST, catalog, max_results=5)
    assert "mcp__slides__save_presentation" in result.matches and "mcp__exporter__save_presentation_file" not in result.matches
    # a server without a tool for a step gets no step placed
    lone = ToolCatalog([tool for tool in slides_catalog.deferred if tool.name not in ("mcp__slides__save_presentation", "mcp__slides__add_slide")])
    plain = HybridBackend().search(PPT_REQUEST, lone, max_results=5)
    assert [c.rule for s in plain.scored for c in s.breakdown if c.term == "(capability)"] == ["capability slot 5: produce a file"]


def test_describe_query_lists_a_chains_steps(encoder):
    lines = HybridBackend().describe_query(PPT_REQUEST)
    assert any("in steps" in line and "create a new PowerPoint presentation" in line and "save the presentation to a file" in line for line in lines)
    assert not any("in steps" in line for line in HybridBackend(capability_chain="off").describe_query(PPT_REQUEST))
    with pytest.raises(ValueError, match="capability_chain"):
        HybridBackend(capability_chain="always")


def test_the_rank_variant_puts_the_steps_just_above_the_slot_which_keeps_its_rank(encoder, embeddings_dir, slides_catalog):
    result = HybridBackend(capability_chain="rank").search(PPT_REQUEST, slides_catalog, max_results=6)
    assert result.matches[4] == "mcp__slides__create_presentation"  # the capability's slot
    assert set(result.matches[2:4]) == {"mcp__slides__save_presentation", "mcp__slides__add_slide"}
    rules = {s.name: [c.rule for c in s.breakdown if c.term == "(capability)"] for s in result.scored}
    assert rules["mcp__slides__add_slide"] == [f"capability slot {result.matches.index('mcp__slides__add_slide') + 1}: produce a file, step 2 of 3"]
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True)


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
