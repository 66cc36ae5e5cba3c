"""The "tool-changes" wire style: tools declared once, the harness adds predicted tools by tool_addition."""
from __future__ import annotations

import pytest

from playground.engine.history import CompactionBoundary, discovered_tool_names
from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.turn import ALLOW, REFUSE, plan_turn
from playground.engine.wires.anthropic_tool_changes import TOOL_CHANGES_BETA
from playground.engine.wires.registry import by_command_name, wire_style

COUNTER = CharEstimateCounter()
ISSUE = "mcp__github__create_issue"


def person(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def turn_for(catalog, messages, *, rules=(), boundary=None, **values):
    values.setdefault("mode", "true")
    return plan_turn(catalog, PermissionPolicy(list(rules)), AgentSettings(wire="tool-changes", **values),
                     ConversationState(list(messages), compaction=boundary), token_counter=COUNTER,
                     backend=ClaudeCodeKeywordBackend())


def stored_after(turn, messages):
    """The history as the loop leaves it: the pending system message stored after the person's message."""
    return [*messages, turn.tool_changes.message] if turn.tool_changes is not None else list(messages)


def test_the_style_is_one_registry_entry_with_its_command_name():
    style = wire_style("tool-changes")
    assert by_command_name("anthropic-tool-changes") is style
    assert style.profile_choice and style.vendor == "anthropic" and style.betas == (TOOL_CHANGES_BETA,)
    # Two loading modes in a task run over every mode: with ToolSearch kept beside the prediction, or not.
    assert style.loading_modes() == ("tool-changes", "tool-changes+search")
    assert style.loading_mode(AgentSettings(wire="tool-changes", tool_changes_search=False)) == "tool-changes"
    assert style.loading_mode(AgentSettings(wire="tool-changes")) == "tool-changes+search"
    assert wire_style("native").loading_modes() == ("native",)


def test_the_first_turn_adds_the_predicted_tools_by_a_system_message(small_catalog):
    first = [person("create an issue in the github repository")]
    turn = turn_for(small_catalog, first, tool_changes_k=2)
    changes = turn.tool_changes
    assert changes.added and changes.added[0] == ISSUE and len(changes.added) <= 2
    assert changes.prediction is not None and changes.prediction.scored  # the scores behind it
    body = turn.wire_request()
    assert body["betas"] == [TOOL_CHANGES_BETA]
    assert body["messages"][-1] == {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": n}} for n in changes.added]}
    deferred = [t["name"] for t in body["tools"] if t.get("defer_loading")]
    assert set(deferred) == {t.name for t in small_catalog.deferred}  # every deferred tool declared, hidden
    assert turn.check_call(ISSUE).verdict == ALLOW  # added this turn: callable
    assert turn.check_call("mcp__slack__post_message").verdict == REFUSE  # declared but never added


def test_the_tools_array_never_changes_across_turns_and_the_additions_stay(small_catalog):
    first = [person("create an issue in the github repository")]
    turn1 = turn_for(small_catalog, first)
    history = stored_after(turn1, first)
    history += [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": ISSUE, "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    turn2 = turn_for(small_catalog, history)
    assert turn2.tool_changes is None  # no new person message: nothing predicted
    assert turn2.wire_request()["tools"] == turn1.wire_request()["tools"]
    assert ISSUE in turn2.request.discovered_tools and turn2.check_call(ISSUE).verdict == ALLOW
    assert discovered_tool_names(history) == list(turn1.tool_changes.added)  # recovered from the history


def test_a_tool_denied_mid_conversation_is_withdrawn_by_a_tool_removal(small_catalog):
    first = [person("create an issue in the github repository")]
    history = stored_after(turn_for(small_catalog, first), first) + [
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]}, person("and again")]
    turn = turn_for(small_catalog, history, rules=[PermissionRule("deny", ISSUE)])
    assert turn.tool_changes.removed == (ISSUE,)
    body = turn.wire_request()
    assert {"type": "tool_removal", "tool": {"type": "tool_reference", "name": ISSUE}} in body["messages"][-1]["content"]
    assert any(t["name"] == ISSUE and t.get("defer_loading") for t in body["tools"])  # still declared: the removal names it
    assert turn.check_call(ISSUE).verdict == REFUSE
    after = turn_for(small_catalog, stored_after(turn, history) + [
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}, person("thanks")],
        rules=[PermissionRule("deny", ISSUE)])
    assert after.tool_changes is None or ISSUE not in after.tool_changes.removed  # withdrawn once


def test_compaction_keeps_the_added_tools(small_catalog):
    boundary = CompactionBoundary(summary="earlier work", discovered_tools=(ISSUE,))
    turn = turn_for(small_catalog, [person("hello there"), {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
                                    {"role": "user", "content": [{"type": "text", "text": "go on"}]}], boundary=boundary,
                    tool_changes_min_score=1000)
    body = turn.wire_request()
    assert body["messages"][1] == {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": ISSUE}}]}
    assert turn.check_call(ISSUE).verdict == ALLOW


def test_the_threshold_and_k_bound_the_additions(small_catalog):
    first = [person("create an issue in the github repository")]
    above = turn_for(small_catalog, first, tool_changes_k=2).tool_changes
    under = turn_for(small_catalog, first, tool_changes_k=2, tool_changes_min_score=1e9).tool_changes
    assert len(above.added) == 2 and under.added == () and under.below_threshold == above.added  # the same top k, none scoring enough
    assert len(turn_for(small_catalog, first, tool_changes_k=1).tool_changes.added) == 1
    with pytest.raises(ValueError, match="tool_changes_k must be at least 1"):
        AgentSettings(wire="tool-changes", tool_changes_k=0)
    with pytest.raises(ValueError, match="tool_changes_min_score must be 0 or more"):
        AgentSettings(wire="tool-changes", tool_changes_min_score=-1)


def test_without_tool_search_the_request_drops_it_and_its_announcement(small_catalog):
    turn = turn_for(small_catalog, [person("create an issue in the github repository")], tool_changes_search=False)
    body = turn.wire_request()
    names = [t["name"] for t in body["tools"]]
    assert "ToolSearch" not in names and "system" not in body
    assert turn.wire_announcement is None and turn.wire_tokens.announcement_tokens == 0
    # the plan says the same as the wire (pages and events read the plan): no ToolSearch loaded, no
    # announcement in the system prompt, and the tokens sent are the tools actually sent
    assert "ToolSearch" not in turn.request.loaded_tools and turn.request.announcement is None
    assert turn.request.system == turn.settings.system_prompt
    with_search = turn_for(small_catalog, [person("create an issue in the github repository")])
    assert "ToolSearch" in [t["name"] for t in with_search.wire_request()["tools"]] and with_search.wire_announcement


def test_a_discovery_in_this_style_is_the_harness_adding_the_tools(small_catalog):
    from playground.engine.toolsearch_tool import run_tool_search

    style = wire_style("tool-changes")
    result = run_tool_search({"query": f"select:{ISSUE}"}, small_catalog, ClaudeCodeKeywordBackend())
    history = [person("hello"), *style.discovery_messages("toolu_x", {"query": f"select:{ISSUE}"}, result,
                                                          definitions=small_catalog.get)]
    assert history[-1] == {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": ISSUE}}]}
    turn = turn_for(small_catalog, history, tool_changes_search=False)
    assert turn.tool_changes is None and turn.check_call(ISSUE).verdict == ALLOW
    assert "ToolSearch" not in [t["name"] for t in turn.wire_request()["tools"]]


def test_a_tool_not_added_is_refused_without_naming_a_toolsearch_that_is_not_there(small_catalog):
    turn = turn_for(small_catalog, [person("create an issue in the github repository")], tool_changes_search=False)
    check = turn.check_call("mcp__slack__post_message")
    assert check.verdict == REFUSE and check.refusal == "deferred"
    assert "ToolSearch" in check.message and "select:" not in check.message
    with_search = turn_for(small_catalog, [person("create an issue in the github repository")])
    assert "select:mcp__slack__post_message" in with_search.check_call("mcp__slack__post_message").message


def test_only_hidden_deferred_tools_are_added(small_catalog):
    turn = turn_for(small_catalog, [person("read the file Read bash")], tool_changes_k=9)
    assert turn.tool_changes.added and not {"Read", "Bash"} & set(turn.tool_changes.added)  # loaded: never "added"
    assert set(turn.tool_changes.added) <= {t.name for t in small_catalog.deferred}


def test_the_first_turn_counts_its_additions_as_sent_and_in_the_cache_model(small_catalog):
    """Turn 1's additions are offered before any history discovered them: the turn's tool names, its
    request size and the cache model's input (which the demo agent reports as usage) include them."""
    from playground.engine.prompt_cache import prefix_blocks

    first = [person("create an issue in the github repository")]
    turn = turn_for(small_catalog, first, tool_changes_k=2)
    added = list(turn.tool_changes.added)
    assert added and not turn.request.discovered_tools  # the plan read a history with nothing discovered
    assert turn.discovered_tools == added
    assert turn.tool_names == [*turn.request.tool_names, *added]
    assert not set(added) & set(turn.deferred_tools)
    assert len(turn.deferred_tools) == len(turn.request.deferred_tools) - len(added)

    body = turn.wire_request()
    definitions = {t["name"]: t for t in body["tools"]}
    added_tokens = COUNTER.count_tools([definitions[n] for n in added])
    without = {**body, "messages": body["messages"][:-1]}  # the same request without the pending additions
    blocks, blocks_without = prefix_blocks(body, COUNTER), prefix_blocks(without, COUNTER)
    grown = sum(b.tokens for b in blocks) - sum(b.tokens for b in blocks_without)
    assert grown >= added_tokens  # each added definition is read where its addition sits (plus the block itself)
    assert [b.key for b in blocks if b.section == "tools"] == [b.key for b in blocks_without if b.section == "tools"]

    tokens = turn.wire_tokens
    assert tokens.sent_tokens == COUNTER.count_tools([t for t in body["tools"] if t["name"] in turn.sent_tool_names])
    nothing_added = turn_for(small_catalog, first, tool_changes_k=2, tool_changes_min_score=1e9)  # all under the threshold
    assert not nothing_added.tool_changes.added
    assert tokens.sent_tokens - nothing_added.wire_tokens.sent_tokens == added_tokens
    assert tokens.request_tokens - nothing_added.wire_tokens.request_tokens >= added_tokens


def test_a_removal_expands_to_no_definition_in_the_cache_model(small_catalog):
    from playground.engine.prompt_cache import prefix_blocks

    tool = small_catalog.get(ISSUE).to_api(defer_loading=True)
    removal = {"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": ISSUE}}]}
    addition = {"role": "system", "content": [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": ISSUE}}]}
    base = {"tools": [tool], "messages": [person("hello")]}

    def count(extra):
        return sum(b.tokens for b in prefix_blocks({**base, "messages": [*base["messages"], extra]}, COUNTER))
    assert count(addition) - count(removal) >= COUNTER.count_tools([tool]) - 5
