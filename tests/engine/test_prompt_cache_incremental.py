"""The cache model works out only what changed since its previous request, with the same figures.

A conversation's requests repeat almost all of the one before (the tools, the history), and the
all-tools baseline repeats every tool each turn: `BlockMemo` keeps each block's facts by its exact
content. These tests pin that a model fed a conversation turn by turn gives the blocks, splits and
prefix breaks of a full recount, that its keys agree with the original whole-request canonical JSON
chain, and that a repeated block is not worked out again (counted, not timed).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest

from playground.engine.prompt_cache import (
    BlockMemo,
    PrefixBlock,
    _canonical,
    _has_breakpoint,
    _tool_references,
    cache_model,
    openai_prefix_blocks,
    prefix_blocks,
    with_cache_breakpoints,
)
from playground.engine.tokens import CharEstimateCounter, TokenCounter, count_messages

COUNTER = CharEstimateCounter()


def reference_blocks(request: dict[str, Any], counter: TokenCounter) -> list[tuple[str, str, str, int, bool]]:
    """The blocks as the code before the memo made them: every block canonicalised and serialised, the
    key a digest of the whole canonical JSON so far."""
    tools = list(request.get("tools") or [])
    definitions = {t.get("name"): t for t in tools}
    digest = hashlib.sha256()
    blocks = []

    def add(section: str, label: str, content: Any, tokens: int) -> None:
        digest.update(json.dumps([section, _canonical(content)], sort_keys=True, default=str).encode())
        blocks.append((section, label, digest.hexdigest(), tokens, bool(_has_breakpoint(content))))

    for tool in tools:
        if not tool.get("defer_loading"):
            add("tools", str(tool.get("name", "?")), tool, counter.count_tools([_canonical(tool)]))
    system = request.get("system")
    if system:
        for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
            add("system", "system prompt", block, counter.count_text(str(block.get("text", ""))))
    for index, message in enumerate(request.get("messages") or []):
        content = message.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            expanded = sum(counter.count_tools([_canonical(definitions[name])])
                           for name in _tool_references(block) if name in definitions)
            add("messages", f"messages[{index}] ({message.get('role', '?')})", {"role": message.get("role"), "block": block},
                count_messages(counter, [_canonical(block)]) + expanded)
    return blocks


def tool(name: str, deferred: bool = False, **schema: Any) -> dict[str, Any]:
    found = {"name": name, "description": f"Does {name} things, with a long enough description to count.",
             "input_schema": {"type": "object", "properties": {k: {"type": "string", "default": v} for k, v in schema.items()}}}
    return {**found, "defer_loading": True} if deferred else found


def conversation(tool_count: int = 40) -> list[dict[str, Any]]:
    """Five requests of one conversation as the native style sends them: tools in full and deferred,
    a discovery (a tool_reference), tool use and results, breakpoints moving with the tail."""
    tools = [tool(f"mcp__s{i % 7}__t{i}", deferred=i >= 4) for i in range(tool_count)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    requests = []

    def send() -> None:
        requests.append(with_cache_breakpoints({"model": "claude-sonnet-4-5", "max_tokens": 512, "tools": tools,
                                                "system": "You are brief.", "messages": [dict(m) for m in messages]}))

    send()
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "ToolSearch", "input": {"query": "weather"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1",
                                               "content": [{"type": "tool_reference", "tool_name": "mcp__s5__t12"}]}]}]
    send()
    messages += [{"role": "assistant", "content": [{"type": "text", "text": "Calling it."},
                                                   {"type": "tool_use", "id": "u2", "name": "mcp__s5__t12", "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u2", "content": "18 °C, cloudy"}]}]
    send()
    tools = [*tools[:2], tool("mcp__new__added"), *tools[2:]]  # a tool added mid-list: later ones move
    send()
    messages += [{"role": "assistant", "content": [{"type": "text", "text": "It is 18 °C."}]},
                 {"role": "user", "content": "And tomorrow?"}]
    send()
    return requests


def as_tuples(blocks: Sequence[PrefixBlock]) -> list[tuple[str, str, str, int, bool]]:
    return [(b.section, b.label, b.key, b.tokens, b.breakpoint) for b in blocks]


def same_shape(ours: list[tuple], theirs: list[tuple]) -> None:
    """Same sections, labels, tokens and breakpoints; keys may be spelt differently (a digest of digests)."""
    assert [(s, lab, t, bp) for s, lab, _, t, bp in ours] == [(s, lab, t, bp) for s, lab, _, t, bp in theirs]


def test_blocks_worked_out_turn_by_turn_equal_a_full_recount_and_the_original_chain():
    requests = conversation()
    memo = BlockMemo()
    ours, theirs = [], []
    for request in requests:
        incremental = as_tuples(prefix_blocks(request, COUNTER, memo))
        # a fresh memo and counter (nothing shared in the process either): the full recount
        assert incremental == as_tuples(prefix_blocks(request, CharEstimateCounter()))
        reference = reference_blocks(request, COUNTER)
        same_shape(incremental, reference)
        ours.append([b[2] for b in incremental])
        theirs.append([b[2] for b in reference])
    # Two blocks of any two requests share a key exactly when the original chain gave them one:
    # every cache hit, write and prefix break is the same.
    flat_ours = [key for keys in ours for key in keys]
    flat_theirs = [key for keys in theirs for key in keys]
    for i in range(len(flat_ours)):
        for j in range(i + 1, len(flat_ours)):
            assert (flat_ours[i] == flat_ours[j]) == (flat_theirs[i] == flat_theirs[j]), (i, j)
    assert len(set(flat_theirs)) < len(flat_theirs)  # the requests did share prefixes (a real check)


@pytest.mark.parametrize("vendor, enabled", [("anthropic", True), ("anthropic", False)])
def test_a_model_fed_turn_by_turn_gives_the_figures_of_one_that_recounts_everything(vendor, enabled):
    incremental = cache_model(vendor, enabled=enabled, counter=COUNTER)
    recounting = cache_model(vendor, enabled=enabled, counter=COUNTER)
    for at, request in enumerate(conversation()):
        # forget the previous request (and, by a new counter, the process's shared tools sections)
        recounting.memo, recounting.counter = BlockMemo(), CharEstimateCounter()
        assert incremental.send(request, at * 10.0) == recounting.send(request, at * 10.0)
    assert incremental.entries == recounting.entries


def test_a_repeated_block_is_not_worked_out_again():
    """The all-tools baseline's 200 tools are canonicalised once, not per turn: the second request
    works out only its new and changed blocks (the tail whose breakpoint moved, the new messages)."""
    tools = [tool(f"mcp__s__t{i}") for i in range(200)]
    first = with_cache_breakpoints({"model": "m", "tools": tools, "system": "s", "messages": [{"role": "user", "content": "hi"}]})
    second = with_cache_breakpoints({"model": "m", "tools": tools, "system": "s", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]})
    model = cache_model("anthropic", counter=COUNTER)
    model.send(first, 0.0)
    assert model.memo.worked_out == 202  # 200 tools, the system block, one message block
    model.send(second, 1.0)
    # messages[0] lost its breakpoint (changed), messages[1] and [2] are new; the tools and system are found
    assert model.memo.worked_out == 202 + 3
    model.send(second, 2.0)
    assert model.memo.worked_out == 205  # nothing changed: nothing worked out
    changed = [*tools[:100], tool("mcp__s__t100", extra="x"), *tools[101:]]
    third = {**second, "tools": with_cache_breakpoints({"tools": changed})["tools"]}
    model.send(third, 3.0)
    assert model.memo.worked_out == 206  # one tool changed: the other 199 found (kept across the repeat)
    assert as_tuples(model.blocks(third)) == as_tuples(prefix_blocks(third, COUNTER))


def test_a_new_conversations_model_finds_the_catalogs_tools_another_made():
    """Every conversation's all-tools baseline sends the same catalog: the process keeps the tools
    sections of its latest tools arrays, so a new model (a new run) does not work them out again."""
    counter = CharEstimateCounter()
    tools = [tool(f"mcp__shared__t{i}") for i in range(50)]
    request = with_cache_breakpoints({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "hi"}]})
    first, second = cache_model("anthropic", counter=counter), cache_model("anthropic", counter=counter)
    assert first.send(request, 0.0) == second.send(request, 0.0)
    assert (first.memo.worked_out, second.memo.worked_out) == (51, 1)  # the second: its message only
    other_counter = cache_model("anthropic", counter=CharEstimateCounter())
    other_counter.send(request, 0.0)
    assert other_counter.memo.worked_out == 51  # counted with another counter: not shared
    assert as_tuples(second.blocks(request)) == as_tuples(prefix_blocks(request, CharEstimateCounter()))


def test_exact_content_only_one_and_one_point_zero_are_different_blocks():
    """Equal by == is not enough: 1, 1.0 and True serialise differently, so they count differently."""
    memo = BlockMemo()
    for value in (1, 1.0, True, 1, "1"):
        request = {"model": "m", "tools": [tool("a", limit=value)], "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x", "n": value}]}]}
        assert as_tuples(prefix_blocks(request, COUNTER, memo)) == as_tuples(prefix_blocks(request, COUNTER))
        same_shape(as_tuples(prefix_blocks(request, COUNTER)), reference_blocks(request, COUNTER))


def test_a_block_marshal_cannot_write_is_worked_out_every_time():
    class Odd:
        def __str__(self) -> str:
            return "odd"

    request = {"model": "m", "tools": [tool("a")], "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "o": Odd()}]}]}
    memo = BlockMemo()
    first = as_tuples(prefix_blocks(request, COUNTER, memo))
    before = memo.worked_out
    assert as_tuples(prefix_blocks(request, COUNTER, memo)) == first
    assert memo.worked_out == before + 1  # only the block holding the object
    same_shape(first, reference_blocks(request, COUNTER))


def test_openai_blocks_turn_by_turn_equal_a_full_recount():
    tools = [{"type": "function", "name": f"f{i}", "description": "d" * 40, "parameters": {"type": "object"},
              **({"defer_loading": True} if i > 3 else {})} for i in range(30)]
    inputs: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    memo = BlockMemo()
    worked: list[int] = []
    for turn in range(4):
        body = {"model": "gpt-5", "tools": tools, "instructions": "be brief", "input": list(inputs)}
        assert as_tuples(openai_prefix_blocks(body, COUNTER, memo)) == as_tuples(openai_prefix_blocks(body, COUNTER))
        worked.append(memo.worked_out)
        inputs += [{"type": "tool_search_output", "tools": tools[4 + turn : 5 + turn]}, {"role": "user", "content": f"turn {turn}"}]
    assert worked[0] == 30 + 1 + 1
    assert [b - a for a, b in zip(worked, worked[1:], strict=False)] == [2, 2, 2]  # only the two new items each turn
