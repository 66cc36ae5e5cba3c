"""The prompt cache: breakpoints as agents place them, and the cache model on hand-built requests.

Token counts here are exact by construction: the counter counts "#" characters, so a block of
"#" * N costs N tokens whatever JSON surrounds it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from playground.engine.permissions import PermissionPolicy
from playground.engine.prompt_cache import (
    OPENAI_CACHE_STEP,
    OPENAI_MIN_CACHED,
    account,
    breakpoints_of,
    cache_control,
    min_cacheable_tokens,
    prefix_blocks,
    prefix_break,
    with_cache_breakpoints,
)
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.tokens import TokenCounter
from playground.engine.turn import plan_turn


class HashCounter(TokenCounter):
    name = "hashes"

    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        return sum(str(t.get("description", "")).count("#") for t in api_tool_dicts)

    def count_text(self, text: str) -> int:
        return text.count("#")


COUNTER = HashCounter()
SONNET = "claude-sonnet-4-5"


def tool(name: str, tokens: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "#" * tokens, "input_schema": {"type": "object"}, **extra}


def text(tokens: int) -> str:
    return "#" * tokens


def request(tools: list[dict[str, Any]], system: int, messages: list[tuple[str, int]], model: str = SONNET) -> dict[str, Any]:
    body = {"model": model, "max_tokens": 100, "tools": tools, "system": text(system),
            "messages": [{"role": role, "content": text(n)} for role, n in messages]}
    return with_cache_breakpoints(body)


BASE_TOOLS = [tool("Read", 1000), tool("ToolSearch", 500)]
FIRST = [("user", 50)]
SECOND = [("user", 50), ("assistant", 30), ("user", 20)]


# -- breakpoints -----------------------------------------------------------------------------------------
def test_breakpoints_go_at_the_end_of_the_tools_prefix_the_system_and_the_tail():
    body = {"model": SONNET, "tools": [tool("Read", 1), tool("ToolSearch", 1), tool("mcp__x__a", 1, defer_loading=True)],
            "system": "be brief", "messages": [{"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]}
    marked = with_cache_breakpoints(body, "1h")
    assert [t.get("cache_control") for t in marked["tools"]] == [None, {"type": "ephemeral", "ttl": "1h"}, None]
    assert marked["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert marked["messages"][0] == {"role": "user", "content": "hi"}
    assert marked["messages"][1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert breakpoints_of(marked) == ["tools: ToolSearch", "system", "messages[1] (assistant)"]
    # the caller's request (the plan's tools and messages) is not changed
    assert "cache_control" not in body["tools"][1] and body["system"] == "be brief"
    assert "cache_control" not in body["messages"][1]["content"][0]
    assert breakpoints_of(body) == []


def test_five_minutes_is_the_default_marker_and_an_unknown_ttl_is_refused():
    assert cache_control("5m") == {"type": "ephemeral"}
    with pytest.raises(ValueError, match="TTL"):
        cache_control("2h")
    with pytest.raises(ValueError, match="TTL"):
        AgentSettings(prompt_cache=True, prompt_cache_ttl="10m")


def test_thinking_blocks_never_carry_the_tail_breakpoint():
    body = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                           {"type": "thinking", "thinking": "x", "signature": "s"}]}]}
    blocks = with_cache_breakpoints(body)["messages"][0]["content"]
    assert "cache_control" in blocks[0] and "cache_control" not in blocks[1]


@pytest.mark.parametrize("extra", [{}, {"wire": "server", "server_search": "bm25"}, {"wire": "client"}])
def test_the_wire_request_carries_breakpoints_only_when_the_profile_caches(small_catalog, extra):
    state = ConversationState([{"role": "user", "content": "hi"}])

    def wire(**values):
        settings = AgentSettings(mode="true", system_prompt="be brief", **extra, **values)
        return plan_turn(small_catalog, PermissionPolicy(), settings, state, token_counter=COUNTER).wire_request()

    assert breakpoints_of(wire()) == []
    cached = wire(prompt_cache=True, prompt_cache_ttl="1h")
    points = breakpoints_of(cached)
    assert points[0].startswith("tools: ") and points[1:] == ["system", "messages[0] (user)"]
    last_in_prefix = [t for t in cached["tools"] if not t.get("defer_loading")][-1]
    assert last_in_prefix["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


# -- the Anthropic model ----------------------------------------------------------------------------------
def test_a_growing_conversation_writes_once_then_reads_what_the_last_request_wrote():
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, request(BASE_TOOLS, 100, SECOND))], counter=COUNTER)
    assert [(t.input_tokens, t.cache_write_tokens, t.cache_read_tokens, t.uncached_tokens) for t in turns] == [
        (1650, 1650, 0, 0), (1700, 50, 1650, 0)]
    assert [t.prefix_break for t in turns] == [None, None]


@pytest.mark.parametrize(("ttl", "gap", "read"), [("5m", 299, 1650), ("5m", 301, 0), ("1h", 301, 1650), ("1h", 3601, 0)])
def test_an_entry_expires_after_its_ttl(ttl, gap, read):
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (gap, request(BASE_TOOLS, 100, SECOND))], ttl=ttl, counter=COUNTER)
    assert turns[1].cache_read_tokens == read
    assert turns[1].cache_write_tokens == 1700 - read


def test_a_hit_refreshes_the_five_minute_ttl():
    """The second request reads the first one's tail entry (not one of its own breakpoints): only the
    refresh keeps that entry alive for the third, 450 s after it was written."""
    first = request(BASE_TOOLS, 100, FIRST)
    turns = account([(0, first), (200, request(BASE_TOOLS, 100, SECOND)), (450, first)], counter=COUNTER)
    assert [t.cache_read_tokens for t in turns] == [0, 1650, 1650]
    unrefreshed = account([(0, first), (200, request(BASE_TOOLS, 100, SECOND)), (301, first)], counter=COUNTER)
    assert unrefreshed[2].cache_read_tokens == 1650  # refreshed at 200, so alive at 301


def test_a_prefix_below_the_models_minimum_is_not_cached():
    assert min_cacheable_tokens("claude-haiku-4-5-20251001") == 4096
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("some-new-model") == 1024
    small = [(0, request(BASE_TOOLS, 100, FIRST, model="claude-haiku-4-5")),
             (10, request(BASE_TOOLS, 100, SECOND, model="claude-haiku-4-5"))]
    assert [(t.cache_write_tokens, t.cache_read_tokens, t.uncached_tokens) for t in account(small, counter=COUNTER)] == [
        (0, 0, 1650), (0, 0, 1700)]
    # A breakpoint below the minimum (the tools: 900 tokens) caches nothing; the tail above it does.
    short_tools = [tool("Read", 400), tool("ToolSearch", 500)]
    first = account([(0, request(short_tools, 100, FIRST))], counter=COUNTER)[0]
    assert (first.cache_write_tokens, first.uncached_tokens) == (1050, 0)


def test_a_discovery_in_the_native_style_keeps_the_prefix():
    """Native: the discovered tool goes with defer_loading (not in the prefix) and its definition
    arrives inline as a tool_reference in the history: everything before is read from the cache."""
    found = tool("mcp__x__send", 300, defer_loading=True)
    turn2 = request([*BASE_TOOLS, found], 100, [("user", 50), ("assistant", 30)])
    turn2["messages"].append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_reference", "tool_name": "mcp__x__send"}]}]})
    turn2 = with_cache_breakpoints(turn2)
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, turn2)], counter=COUNTER)
    assert turns[1].prefix_break is None
    # the reference costs the definition it expands to: 300
    assert (turns[1].input_tokens, turns[1].cache_read_tokens, turns[1].cache_write_tokens) == (1980, 1650, 330)


def test_a_discovery_in_the_client_style_breaks_the_prefix_at_the_tools():
    """Client: the discovered tool joins the tools array, so everything after it is written again."""
    turn2 = request([*BASE_TOOLS, tool("mcp__x__send", 300)], 100, SECOND)
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, turn2)], counter=COUNTER)
    broke = turns[1].prefix_break
    assert broke is not None and broke.section == "tools" and broke.index == 2
    assert broke.reason == "tools array changed: mcp__x__send discovered"
    # the tools before the new one are still cached (the old tools breakpoint, within the lookback)
    assert (turns[1].input_tokens, turns[1].cache_read_tokens, turns[1].cache_write_tokens) == (2000, 1500, 500)


def test_a_changed_first_tool_rewrites_everything_after_it():
    turn2 = request([tool("mcp__x__send", 300), *BASE_TOOLS], 100, SECOND)
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, turn2)], counter=COUNTER)
    assert turns[1].prefix_break.index == 0 and "mcp__x__send discovered" in turns[1].prefix_break.reason
    assert (turns[1].cache_read_tokens, turns[1].cache_write_tokens) == (0, 2000)


def test_a_changed_system_prompt_and_a_rewritten_history_are_named():
    first = request(BASE_TOOLS, 100, FIRST)
    system_changed = prefix_break(first, request(BASE_TOOLS, 120, SECOND), COUNTER)
    assert system_changed.section == "system" and system_changed.index == 2
    rewritten = prefix_break(request(BASE_TOOLS, 100, SECOND), request(BASE_TOOLS, 100, [("user", 40)]), COUNTER)
    assert rewritten.section == "messages" and "messages[0] (user)" in rewritten.reason
    assert prefix_break(None, first, COUNTER) is None


def test_the_lookback_reaches_twenty_blocks_back_and_no_further():
    def with_new_blocks(count: int) -> dict[str, Any]:
        blocks = [{"type": "text", "text": text(1)} for _ in range(count)]
        body = request(BASE_TOOLS, 100, FIRST)
        body["messages"] = [{"role": "user", "content": text(50)}, {"role": "assistant", "content": blocks}]
        return with_cache_breakpoints(body)

    near = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, with_new_blocks(20))], counter=COUNTER)[1]
    far = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, with_new_blocks(21))], counter=COUNTER)[1]
    assert near.cache_read_tokens == 1650
    assert far.cache_read_tokens == 1600  # only the system breakpoint's entry (1,600 ≥ 1,024) is found


def test_caching_off_leaves_every_token_uncached_but_still_names_the_break():
    turn2 = request([*BASE_TOOLS, tool("mcp__x__send", 300)], 100, SECOND)
    turns = account([(0, request(BASE_TOOLS, 100, FIRST)), (10, turn2)], enabled=False, counter=COUNTER)
    assert [(t.uncached_tokens, t.cache_write_tokens, t.cache_read_tokens) for t in turns] == [(1650, 0, 0), (2000, 0, 0)]
    assert turns[1].prefix_break.section == "tools"


def test_blocks_ignore_the_breakpoint_markers():
    plain = {"model": SONNET, "tools": BASE_TOOLS, "system": text(100), "messages": [{"role": "user", "content": text(50)}]}
    assert [b.key for b in prefix_blocks(plain, COUNTER)] == [b.key for b in prefix_blocks(with_cache_breakpoints(plain), COUNTER)]


# -- the OpenAI model -----------------------------------------------------------------------------------
def test_openai_caches_the_longest_shared_prefix_in_steps_above_its_threshold():
    plain = lambda messages: {"model": "gpt-5", "tools": BASE_TOOLS, "instructions": text(100),  # noqa: E731 - a local shorthand
                              "input": [{"role": r, "content": text(n)} for r, n in messages]}
    turns = account([(0, plain(FIRST)), (10, plain(SECOND))], "openai", counter=COUNTER)
    assert (turns[0].cache_read_tokens, turns[0].cache_write_tokens) == (0, 0)
    expected = OPENAI_MIN_CACHED + (1650 - OPENAI_MIN_CACHED) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
    assert (turns[1].cache_read_tokens, turns[1].cache_write_tokens, turns[1].uncached_tokens) == (expected, 0, 1700 - expected)
    short = lambda: {"model": "gpt-5", "tools": [tool("Read", 500)], "messages": [{"role": "user", "content": text(50)}]}  # noqa: E731 - a local shorthand
    assert account([(0, short()), (1, short())], "openai", counter=COUNTER)[1].cache_read_tokens == 0


def test_openai_sees_a_deferred_namespace_by_its_name_and_a_search_output_by_the_tools_it_loads():
    namespace = {"type": "namespace", "name": "mcp__x", "description": "x tools", "tools": [tool("send", 300, defer_loading=True)]}
    before = {"model": "gpt-5", "tools": [tool("Read", 1000), namespace], "input": [{"role": "user", "content": text(50)}]}
    output = {"type": "tool_search_output", "call_id": "c1", "tools": [tool("send", 300)]}
    after = {**before, "input": [*before["input"], {"type": "tool_search_call", "call_id": "c1"}, output]}
    turns = account([(0, before), (5, after)], "openai", counter=COUNTER)
    assert [t.input_tokens for t in turns] == [1050, 1350]
    assert turns[1].prefix_break is None and turns[1].cache_read_tokens == 1024
    # Chat Completions: a discovered function joins the tools list and breaks the prefix there
    chat = lambda tools: {"model": "gpt-5", "tools": tools, "messages": [{"role": "user", "content": text(50)}]}  # noqa: E731 - a local shorthand
    function = {"type": "function", "function": {"name": "mcp__x__send", "description": text(300)}}
    broke = account([(0, chat([tool("Read", 1000)])), (5, chat([tool("Read", 1000), function]))], "openai", counter=COUNTER)[1]
    assert broke.prefix_break.reason == "tools array changed: mcp__x__send discovered"
