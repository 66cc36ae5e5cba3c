from __future__ import annotations

import json

import pytest

from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.toolsearch_tool import (
    TOOL_LOADED_TEXT,
    TOOL_SEARCH_TOOL,
    ToolSearchInputError,
    deferred_tool_not_loaded_result,
    run_tool_search,
    tool_loaded_block,
    tool_search_result_content,
    tool_search_user_blocks,
)
from playground.engine.tools import ToolCatalog, is_deferred

from .conftest import mcp


def test_the_toolsearch_tool_is_never_deferred_and_takes_query_and_max_results():
    assert TOOL_SEARCH_TOOL.name == "ToolSearch"
    assert not is_deferred(TOOL_SEARCH_TOOL)
    schema = TOOL_SEARCH_TOOL.to_api()["input_schema"]
    assert schema["required"] == ["query"]
    assert schema["properties"]["max_results"]["default"] == 5


def test_max_results_defaults_to_five():
    catalog = ToolCatalog([mcp("s", f"tool_{i}") for i in range(8)])
    result = run_tool_search({"query": "tool"}, catalog, ClaudeCodeKeywordBackend())
    assert len(result.matches) == 5


def test_an_integral_float_max_results_is_accepted(small_catalog):
    result = run_tool_search({"query": "github", "max_results": 1.0}, small_catalog, ClaudeCodeKeywordBackend())
    assert len(result.matches) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("github", "must be an object"),
        ({}, "missing the required field 'query'"),
        ({"query": 3}, "'query' must be a string"),
        ({"query": "x", "max_results": 0}, "at least 1"),
        ({"query": "x", "max_results": "5"}, "must be an integer"),
        ({"query": "x", "max_results": True}, "must be an integer"),
        ({"query": "x", "max_results": 2.5}, "must be an integer"),
    ],
)
def test_bad_input_raises_a_clear_error(small_catalog, arguments, message):
    with pytest.raises(ToolSearchInputError, match=message):
        run_tool_search(arguments, small_catalog, ClaudeCodeKeywordBackend())


def test_native_content_is_tool_references_only_with_tool_loaded_beside_it(small_catalog):
    result = run_tool_search({"query": "+slack"}, small_catalog, ClaudeCodeKeywordBackend())
    content = tool_search_result_content(result, "native")
    assert content == [{"type": "tool_reference", "tool_name": n} for n in result.matches]
    blocks = tool_search_user_blocks("toolu_1", result, "native")
    assert blocks[0]["type"] == "tool_result" and blocks[0]["content"] == content
    assert blocks[1] == {"type": "text", "text": TOOL_LOADED_TEXT}


def test_client_content_is_one_text_block_with_the_json_output(small_catalog):
    result = run_tool_search({"query": "+slack"}, small_catalog, ClaudeCodeKeywordBackend())
    [block] = tool_search_result_content(result, "client")
    assert json.loads(block["text"]) == {"matches": result.matches, "query": "+slack", "total_deferred_tools": 7}
    assert tool_loaded_block(result, "client") is None


def test_no_match_is_text_in_both_styles_and_names_pending_servers(small_catalog):
    result = run_tool_search({"query": "zebra"}, small_catalog, ClaudeCodeKeywordBackend(), pending_mcp_servers=["jira"])
    for style in ("native", "client"):
        [block] = tool_search_result_content(result, style)
        assert block["type"] == "text" and "jira" in block["text"]
        assert tool_loaded_block(result, style) is None


def test_an_unknown_planning_style_is_rejected(small_catalog):
    result = run_tool_search({"query": "github"}, small_catalog, ClaudeCodeKeywordBackend())
    with pytest.raises(ValueError, match="unknown planning style 'smoke'"):
        tool_search_result_content(result, "smoke")


def test_calling_an_unloaded_deferred_tool_answers_with_an_error_telling_to_select_it():
    result = deferred_tool_not_loaded_result("toolu_9", "mcp__github__create_issue")
    assert result["is_error"] is True and result["tool_use_id"] == "toolu_9"
    assert "select:mcp__github__create_issue" in result["content"][0]["text"]
