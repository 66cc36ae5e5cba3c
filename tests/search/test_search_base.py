from __future__ import annotations

import pytest

from playground.engine.search.base import load_backend, read_query
from playground.engine.search.query import split_terms
from playground.engine.search.backends import DEFAULT_BACKEND, BUILTIN_BACKENDS, get_backend
from playground.engine.search.keyword import ClaudeCodeKeywordBackend


def test_select_reads_names_in_order_without_duplicates_and_the_prefix_is_case_insensitive():
    reading = read_query("SELECT: b , a,b,, c")
    assert reading.kind == "select"
    assert reading.selected_names == ("b", "a", "c")


def test_keyword_terms_are_lowercased_and_plus_marks_a_required_term():
    reading = read_query("  +Slack send + ++x ")
    assert reading.kind == "keyword"
    assert reading.required == ("slack", "+x")
    assert reading.optional == ("send", "+")


def test_terms_split_on_javascript_whitespace():
    assert split_terms("a\u3000b\ufeffc\x1cd") == ["a", "b", "c\x1cd"]


def test_a_blank_query_reads_as_empty():
    assert read_query(" \t ").kind == "empty"


def test_select_returns_existing_names_in_the_order_given_and_reports_the_rest(core_and_deferred_catalog):
    result = ClaudeCodeKeywordBackend().search("select:mcp__slack__post_message,Nope,Read,mcp__github__list_issues", core_and_deferred_catalog)
    assert result.matches == ["mcp__slack__post_message", "Read", "mcp__github__list_issues"]
    assert result.not_found == ["Nope"]
    assert result.already_loaded == ["Read"]  # selecting a loaded tool is a harmless no-op


def test_a_query_equal_to_a_tool_name_returns_that_tool_whatever_the_case(core_and_deferred_catalog):
    result = ClaudeCodeKeywordBackend().search("MCP__GITHUB__CREATE_ISSUE", core_and_deferred_catalog)
    assert result.reading.kind == "exact"
    assert result.matches == ["mcp__github__create_issue"]


def test_an_mcp_prefix_query_returns_deferred_tools_with_that_prefix_up_to_max_results(core_and_deferred_catalog):
    result = ClaudeCodeKeywordBackend().search("mcp__github__", core_and_deferred_catalog, max_results=2)
    assert result.reading.kind == "prefix"
    assert result.matches == ["mcp__github__create_issue", "mcp__github__list_issues"]


def test_an_mcp_prefix_that_matches_nothing_falls_through_to_keyword_scoring(core_and_deferred_catalog):
    result = ClaudeCodeKeywordBackend().search("mcp__slackx", core_and_deferred_catalog)
    assert result.reading.kind == "keyword"
    assert "fell through" in result.reading.note
    assert result.matches == []


def test_no_match_names_the_servers_still_connecting(core_and_deferred_catalog):
    result = ClaudeCodeKeywordBackend().search("zebra", core_and_deferred_catalog, pending_mcp_servers=["jira"])
    assert result.matches == []
    assert result.to_output()["pending_mcp_servers"] == ["jira"]


def test_backends_load_by_registry_name_default_or_dotted_path():
    assert get_backend("default").name == DEFAULT_BACKEND  # set from the search evaluation
    assert get_backend("naive").name == "naive"
    assert load_backend(BUILTIN_BACKENDS["claude-code"]).name == "claude-code"
    with pytest.raises(ValueError, match="unknown search backend"):
        get_backend("nope")
