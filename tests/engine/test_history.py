from __future__ import annotations

import copy
import json

from playground.engine.history import (
    CompactionBoundary,
    discovered_tool_names,
    drop_dangling_references,
    referenced_tool_names,
    strip_tool_references,
)


def search_turn(use_id, content, *, is_error=False):
    result = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    if is_error:
        result["is_error"] = True
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": "ToolSearch", "input": {"query": "x"}}]},
        {"role": "user", "content": [result, {"type": "text", "text": "Tool loaded."}]},
    ]


def refs(*names):
    return [{"type": "tool_reference", "tool_name": n} for n in names]


def test_discovered_tools_come_from_tool_references_in_order_of_first_discovery():
    messages = [{"role": "user", "content": "hi"}, *search_turn("a", refs("x", "y")), *search_turn("b", refs("y", "z"))]
    assert discovered_tool_names(messages) == ["x", "y", "z"]


def test_client_style_results_count_only_for_toolsearch_calls():
    client = [{"type": "text", "text": json.dumps({"matches": ["p", "q"], "query": "x", "total_deferred_tools": 9})}]
    other = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "o", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "o", "content": json.dumps({"matches": ["evil"]})}]},
    ]
    messages = [*search_turn("a", client), *other]
    assert discovered_tool_names(messages) == ["p", "q"]


def test_error_results_and_no_match_text_discover_nothing():
    messages = [*search_turn("a", refs("x"), is_error=True), *search_turn("b", [{"type": "text", "text": "No matching deferred tools found"}])]
    assert discovered_tool_names(messages) == []


def test_the_compaction_boundary_carries_discovered_tools_first():
    boundary = CompactionBoundary(summary="s", discovered_tools=("old",))
    assert discovered_tool_names(search_turn("a", refs("new", "old")), boundary) == ["old", "new"]


def test_strip_replaces_references_by_a_marker_and_leaves_the_input_untouched():
    messages = search_turn("a", refs("x", "y"))
    before = copy.deepcopy(messages)
    stripped = strip_tool_references(messages)
    assert messages == before
    assert stripped[1]["content"][0]["content"] == [{"type": "text", "text": "[ToolSearch loaded: x, y]"}]
    assert referenced_tool_names(stripped) == []


def test_dangling_references_are_dropped_and_an_emptied_result_gets_a_marker():
    messages = [*search_turn("a", refs("x", "gone")), *search_turn("b", refs("gone"))]
    cleaned = drop_dangling_references(messages, {"x"})
    assert cleaned[1]["content"][0]["content"] == refs("x")  # references only, no text mixed in
    assert cleaned[3]["content"][0]["content"] == [{"type": "text", "text": "[tools no longer available: gone]"}]
    assert referenced_tool_names(cleaned) == ["x"]


def test_a_compaction_carries_what_anthropics_server_side_search_found():
    from playground.engine.history import carried_tool_names

    messages = [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srv_1", "name": "tool_search_tool_bm25", "input": {"query": "time"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srv_1", "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "mcp__time__get_current_time"}]}}]},
    ]
    # While the search is in the history the server expands it: nothing is "discovered" for the plan.
    assert discovered_tool_names(messages) == []
    assert carried_tool_names(messages, CompactionBoundary("s", discovered_tools=("a",))) == ["a", "mcp__time__get_current_time"]
