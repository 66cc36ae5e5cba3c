"""Where search failed, read from a history: empty searches, and searches whose results did not hold
the tool the model went on to call (found by a later search or loaded by `select:`)."""
from __future__ import annotations

import json

from playground.engine.search.misses import EMPTY, MISSED, SearchMiss, keyword_searches, search_misses
from tests.search.test_usage import FORECAST, ISSUE, call, references, result, search_use

MERGE = "mcp__gitlab__create_merge_request"
SEARCHABLE = {ISSUE, FORECAST, MERGE}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_a_search_that_missed_then_a_select_then_the_call_is_one_miss_loaded_by_select():
    messages = [
        user("Open an issue about the login bug"),
        search_use("s1", "bug report"), references("s1", MERGE),
        search_use("s2", f"select:{ISSUE}"), references("s2", ISSUE),
        call("c1", ISSUE), result("c1"),
    ]
    assert search_misses(messages, SEARCHABLE) == [SearchMiss("bug report", MISSED, ISSUE, (MERGE,), "select")]


def test_a_search_that_missed_then_a_search_that_found_it_credits_only_the_first():
    messages = [
        search_use("s1", "bug report"), references("s1", MERGE),
        search_use("s2", "open issue"), references("s2", ISSUE, MERGE),
        call("c1", ISSUE), result("c1"),
    ]
    assert search_misses(messages, SEARCHABLE) == [SearchMiss("bug report", MISSED, ISSUE, (MERGE,), "search")]


def test_an_empty_search_counts_whether_or_not_a_call_follows():
    answered = [search_use("s1", "zebra stripes"), references("s1"), search_use("s2", f"select:{ISSUE}"), references("s2", ISSUE),
                call("c1", ISSUE), result("c1")]
    assert search_misses(answered, SEARCHABLE) == [SearchMiss("zebra stripes", EMPTY, ISSUE, (), "select")]
    # nothing called before the next request (or the end): still an empty search, with no tool to label it
    unanswered = [user("first"), search_use("s1", "zebra stripes"), references("s1"), user("second")]
    assert search_misses(unanswered, SEARCHABLE) == [SearchMiss("zebra stripes", EMPTY)]
    assert search_misses(unanswered[:3], SEARCHABLE) == [SearchMiss("zebra stripes", EMPTY)]


def test_client_style_text_results_are_read_like_references():
    text_result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s1",
                                                "content": [{"type": "text", "text": json.dumps({"matches": [FORECAST]})}]}]}
    messages = [search_use("s1", "open bug"), text_result, call("c1", ISSUE), result("c1")]
    assert search_misses(messages, SEARCHABLE) == [SearchMiss("open bug", MISSED, ISSUE, (FORECAST,), "")]


def test_anthropics_server_side_search_is_read_too():
    messages = [{"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "bug report"}},
        {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": MERGE}]}},
        {"type": "tool_use", "id": "c1", "name": ISSUE, "input": {}},
    ]}, result("c1")]
    assert search_misses(messages, SEARCHABLE) == [SearchMiss("bug report", MISSED, ISSUE, (MERGE,), "")]


def test_what_is_not_a_miss():
    hit = [search_use("s1", "open bug report"), references("s1", ISSUE, MERGE), call("c1", ISSUE), result("c1")]
    failed_call = [search_use("s1", "bug report"), references("s1", MERGE), call("c1", ISSUE), result("c1", is_error=True)]
    failed_search = [search_use("s1", "bug report"), references("s1", is_error=True), call("c1", ISSUE), result("c1")]
    core_tool = [search_use("s1", "bug report"), references("s1", MERGE), call("c1", "Bash"), result("c1")]
    by_name = [search_use("s1", f"select:{ISSUE}"), references("s1", ISSUE), call("c1", ISSUE), result("c1")]
    found_but_unused = [user("a"), search_use("s1", "bug report"), references("s1", MERGE), user("b")]
    for messages in (hit, failed_call, failed_search, core_tool, by_name, found_but_unused):
        assert search_misses(messages, SEARCHABLE) == [], messages


def test_a_call_closes_the_searches_before_it_and_later_ones_start_afresh():
    messages = [
        search_use("s1", "bug report"), references("s1", MERGE),
        call("c1", ISSUE), result("c1"),
        search_use("s2", "weather tomorrow"), references("s2", FORECAST),
        call("c2", FORECAST), result("c2"),  # a hit: s1 is not counted again
    ]
    assert search_misses(messages, SEARCHABLE) == [SearchMiss("bug report", MISSED, ISSUE, (MERGE,), "")]


def test_keyword_searches_counts_the_keyword_searches_of_both_kinds_and_nothing_else():
    server_search = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "bug report"}}]}
    messages = [
        user("Open an issue"), search_use("s1", "bug report"), references("s1", MERGE), server_search,
        search_use("s2", f"select:{ISSUE}"), search_use("s3", "mcp__github"),  # by name or prefix: not keyword searches
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": ISSUE, "input": {"query": "bug"}}]},
        {"role": "user", "content": [{"type": "tool_use", "id": "s4", "name": "ToolSearch", "input": {"query": "weather"}}]},
    ]
    assert keyword_searches(messages) == 2
