"""select:, exact names, mcp__ prefixes and +required terms: every retrieval backend answers them
exactly as the Claude Code keyword backend does (the base class answers the first three; the
required-term filter is each backend's own code, so it is compared here)."""
from __future__ import annotations

import pytest

from playground.engine.search.backends import get_backend

QUERIES_WITH_FIXED_ANSWERS = [
    "select:mcp__github__create_issue,mcp__time__convert_time",
    "select:mcp__github__create_issue,Missing_tool,mcp__github__create_issue",
    "SELECT:Read",
    "mcp__github__create_issue",
    "MCP__GITHUB__CREATE_ISSUE",
    "NotebookEdit",
    "mcp__github",
    "mcp__git",
]
REQUIRED_ONLY = ["+github", "+git", "+repository", "+file +new", "+weather", "+nothing-matches", "+e-mail"]


@pytest.fixture(params=["bm25", "hybrid", "hybrid-pooled", "semantic"])
def backend(request):
    if request.param == "semantic":
        request.getfixturevalue("encoder")
    request.getfixturevalue("embeddings_dir")
    return get_backend(request.param)


@pytest.mark.parametrize("query", QUERIES_WITH_FIXED_ANSWERS)
def test_special_forms_match_the_claude_code_backend(backend, small_catalog, query):
    cc = get_backend("claude-code")
    ours, theirs = backend.search(query, small_catalog), cc.search(query, small_catalog)
    assert ours.reading.kind == theirs.reading.kind
    assert ours.matches == theirs.matches
    assert ours.not_found == theirs.not_found
    assert ours.already_loaded == theirs.already_loaded


@pytest.mark.parametrize("query", REQUIRED_ONLY)
def test_required_terms_keep_the_same_tools_as_claude_code(backend, small_catalog, query):
    cc = get_backend("claude-code")
    ours = backend.search(query, small_catalog, max_results=50)
    theirs = cc.search(query, small_catalog, max_results=50)
    assert set(ours.matches) == set(theirs.matches)


def test_required_terms_filter_and_the_rest_rank(backend, small_catalog):
    result = backend.search("+github open an issue", small_catalog, max_results=10)
    assert result.matches[0] == "mcp__github__create_issue"
    assert all(name.startswith("mcp__github__") for name in result.matches)


def test_prefix_that_matches_nothing_falls_through_to_ranking(backend, small_catalog):
    result = backend.search("mcp__nothing weather", small_catalog)
    assert result.reading.note
    assert result.reading.kind == "keyword"


@pytest.mark.parametrize("terms", [("e",), ("ile",), ("e-mail",), ("re", "file"), ("git",), ("nothing",), ("time", "zone"), ("a.b",)])
def test_required_filter_equals_the_rule_applied_to_every_tool(small_catalog, terms):
    from playground.engine.search.names import matches_required_term, parse_tool_name
    from playground.engine.search.required import RequiredTermFilter

    tools = list(small_catalog.deferred)
    expected = [
        all(matches_required_term(parse_tool_name(t.name), term, t.description.lower(), t.search_hint.lower()) for term in terms)
        for t in tools
    ]
    assert RequiredTermFilter(tools).mask(terms).tolist() == expected


@pytest.mark.parametrize("query", ["zzzz qqqq", "xyzzy plugh"])
def test_gibberish_finds_nothing_and_names_the_pending_servers(backend, small_catalog, query):
    """A sentence encoder always finds something similar; ToolSearch must still be able to say
    'no match' so the model hears which MCP servers are still connecting."""
    result = backend.search(query, small_catalog, pending_mcp_servers=["jira"])
    assert result.matches == []
    assert result.to_output()["pending_mcp_servers"] == ["jira"]
