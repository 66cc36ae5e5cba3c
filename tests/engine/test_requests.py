"""Per-turn request building: the order of the steps, both wire styles, off mode, and the invariants."""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.engine.history import CompactionBoundary, discovered_tool_names, referenced_tool_names
from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState, build_request
from playground.engine.tokens import CharEstimateCounter
from playground.engine.tools import Tool, ToolCatalog
from playground.engine.turn import plan_turn

from .conftest import mcp
from .strategies import SERVERS, catalogs

COUNTER = CharEstimateCounter()


def search_turn(use_id, names, *, style="native"):
    if style == "native":
        content = [{"type": "tool_reference", "tool_name": n} for n in names]
    else:
        content = [{"type": "text", "text": json.dumps({"matches": list(names), "query": "q", "total_deferred_tools": 1})}]
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": "ToolSearch", "input": {"query": "q"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": content}]},
    ]


def plan_for(catalog, *, rules=(), messages=(), compaction=None, **settings_values):
    settings_values.setdefault("mode", "true")
    return build_request(
        catalog,
        PermissionPolicy(rules),
        AgentSettings(**settings_values),
        ConversationState(list(messages), compaction),
        token_counter=COUNTER,
    )


def test_a_first_turn_sends_loaded_tools_and_toolsearch_and_announces_the_deferred_ones(small_catalog):
    plan = plan_for(small_catalog, messages=[{"role": "user", "content": "hi"}])
    assert plan.tool_names == ["Read", "Bash", "ToolSearch"]
    assert "mcp__github__create_issue" in plan.deferred_tools and "NotebookEdit" in plan.deferred_tools
    assert "<available-deferred-tools>" in plan.system and "mcp__slack__post_message" in plan.system
    assert plan.tokens.sent_tokens == COUNTER.count_tools(plan.tools)
    assert plan.tokens.baseline_tokens == COUNTER.count_tools([t.to_api() for t in small_catalog])
    assert plan.tokens.announcement_tokens == COUNTER.count_text(plan.announcement.text)


def test_deferring_many_large_tools_saves_most_of_their_tokens():
    catalog = ToolCatalog([Tool(name="Read", description="Read a file."), *(mcp("s", f"tool_{i}", "Does a thing. " * 40) for i in range(40))])
    tokens = plan_for(catalog).tokens
    assert tokens.saved_percent > 80
    assert tokens.saved_tokens == tokens.baseline_tokens - tokens.sent_tokens - tokens.announcement_tokens


def test_the_whole_request_is_counted_against_the_context_window():
    catalog = ToolCatalog([Tool(name="Read", description="Read a file."), *(mcp("s", f"tool_{i}", "Does a thing. " * 40) for i in range(40))])
    messages = [{"role": "user", "content": "hello " * 50}]
    for mode in ("true", "false"):
        plan = plan_for(catalog, messages=messages, mode=mode, system_prompt="Be brief.", context_window=2_000)
        expected = COUNTER.count_tools(plan.tools) + COUNTER.count_text(plan.system) + COUNTER.count_text(json.dumps(plan.messages))
        assert plan.tokens.request_tokens == expected
        assert plan.tokens.to_dict()["context_window"] == 2_000
    # Every tool in full does not fit 2,000 tokens; the deferred request does.
    assert plan_for(catalog, messages=messages, mode="false", context_window=2_000).tokens.over_window
    assert not plan_for(catalog, messages=messages, mode="true", context_window=2_000).tokens.over_window
    assert plan_for(catalog, messages=messages, mode="false", context_window=2_000).tokens.to_dict()["over_window"] is True


def test_native_sends_discovered_tools_with_defer_loading_and_keeps_their_references(small_catalog):
    messages = [{"role": "user", "content": "hi"}, *search_turn("t1", ["mcp__github__create_issue"])]
    plan = plan_for(small_catalog, messages=messages)
    assert plan.tools[-1]["name"] == "mcp__github__create_issue" and plan.tools[-1]["defer_loading"] is True
    assert plan.discovered_tools == ["mcp__github__create_issue"]
    assert referenced_tool_names(plan.messages) == ["mcp__github__create_issue"]


def test_client_style_sends_discovered_tools_as_ordinary_tools_and_no_references(small_catalog):
    messages = [{"role": "user", "content": "hi"}, *search_turn("t1", ["mcp__github__create_issue"]), *search_turn("t2", ["mcp__slack__post_message"], style="client")]
    plan = plan_for(small_catalog, messages=messages, wire="client")
    assert plan.discovered_tools == ["mcp__github__create_issue", "mcp__slack__post_message"]
    assert all("defer_loading" not in t for t in plan.tools)
    assert referenced_tool_names(plan.messages) == []


def test_a_discovered_tool_later_denied_is_not_sent_and_its_reference_is_dropped(small_catalog):
    messages = [{"role": "user", "content": "hi"}, *search_turn("t1", ["mcp__github__create_issue", "mcp__slack__post_message"])]
    plan = plan_for(small_catalog, rules=[PermissionRule("deny", "mcp__slack")], messages=messages)
    assert "mcp__slack__post_message" not in plan.tool_names
    assert referenced_tool_names(plan.messages) == ["mcp__github__create_issue"]
    assert "mcp__slack__post_message" not in plan.searchable
    assert "mcp__slack__post_message" not in plan.system


def test_tool_search_off_sends_every_permitted_tool_and_turns_references_into_text(small_catalog):
    messages = [{"role": "user", "content": "hi"}, *search_turn("t1", ["mcp__github__create_issue"])]
    plan = plan_for(small_catalog, messages=messages, mode="false")
    assert plan.tool_names == [t.name for t in small_catalog]
    assert "ToolSearch" not in plan.tool_names and plan.announcement is None
    assert referenced_tool_names(plan.messages) == []
    assert plan.messages[-1]["content"][0]["content"][0]["text"] == "[ToolSearch loaded: mcp__github__create_issue]"
    assert plan.tokens.sent_tokens == plan.tokens.baseline_tokens and len(plan.searchable) == 0


def test_tools_carried_over_a_compaction_are_sent_as_ordinary_tools_so_the_model_sees_them(small_catalog):
    boundary = CompactionBoundary(summary="We filed an issue.", discovered_tools=("mcp__github__create_issue",))
    plan = plan_for(small_catalog, messages=[{"role": "user", "content": "go on"}], compaction=boundary)
    carried = next(t for t in plan.tools if t["name"] == "mcp__github__create_issue")
    assert "defer_loading" not in carried
    assert "We filed an issue." in plan.messages[0]["content"][0]["text"]


def test_delta_announcements_go_into_the_last_user_message_and_say_only_changes(small_catalog):
    first = plan_for(small_catalog, messages=[{"role": "user", "content": "hi"}], announcement_style="delta")
    assert first.announcement.kind == "full" and first.announcement_block is not None
    stored = [{"role": "user", "content": [{"type": "text", "text": "hi"}, first.announcement_block]}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    assert plan_for(small_catalog, messages=stored, announcement_style="delta").announcement is None
    fewer = plan_for(small_catalog, messages=stored, announcement_style="delta", rules=[PermissionRule("deny", "mcp__fs__read_file")])
    assert fewer.announcement.removed == ("mcp__fs__read_file",)
    assert fewer.messages[-1]["content"][-1] == fewer.announcement_block


def test_a_model_calling_an_unloaded_deferred_tool_is_told_to_select_it(small_catalog):
    plan = plan_for(small_catalog, rules=[PermissionRule("deny", "Bash")])
    assert "select:mcp__github__create_issue" in plan.call_error("mcp__github__create_issue")
    assert plan.call_error("Read") is None
    assert "denied" in plan.call_error("Bash")
    assert "does not exist" in plan.call_error("Nope")


def test_the_api_kwargs_carry_model_system_messages_and_tools(small_catalog):
    kwargs = plan_for(small_catalog, messages=[{"role": "user", "content": "hi"}], system_prompt="Be brief.").to_api_kwargs()
    assert kwargs["model"] == "claude-sonnet-4-5" and kwargs["system"].startswith("Be brief.")
    assert [t["name"] for t in kwargs["tools"]] == ["Read", "Bash", "ToolSearch"]
    json.dumps(plan_for(small_catalog).to_dict())  # serialisable for events


def test_a_catalog_entry_named_toolsearch_is_replaced_by_the_engines_own():
    catalog = ToolCatalog([Tool(name="ToolSearch", description="fake"), mcp("s", "a")])
    plan = plan_for(catalog)
    [search] = [t for t in plan.tools if t["name"] == "ToolSearch"]
    assert search["description"] != "fake"


@pytest.mark.parametrize("mode", ["true", "", "auto:0"])
def test_every_permitted_tool_deferred_and_toolsearch_denied_means_everything_in_full(mode):
    catalog = ToolCatalog([mcp("s", "a"), mcp("s", "b")])
    plan = plan_for(catalog, mode=mode, rules=[PermissionRule("deny", "ToolSearch")])
    assert not plan.decision.enabled and plan.tool_names == ["mcp__s__a", "mcp__s__b"]
    assert all("defer_loading" not in t for t in plan.tools)


# -- invariants over random catalogs, rules and histories --------------------------------------------


@st.composite
def rules_for(draw, catalog: ToolCatalog):
    names = [t.name for t in catalog] + ["ToolSearch"]
    patterns = st.one_of(
        st.sampled_from(names),
        st.sampled_from(SERVERS).map(lambda s: f"mcp__{s}"),
        st.sampled_from(SERVERS).map(lambda s: f"mcp__{s}__*"),
    )
    return draw(st.lists(st.builds(PermissionRule, st.sampled_from(["allow", "ask", "deny"]), patterns), max_size=4))


@st.composite
def histories(draw, catalog: ToolCatalog):
    names = st.one_of(st.sampled_from([t.name for t in catalog] or ["ghost"]), st.sampled_from(["ghost", "mcp__gone__tool"]))
    messages = [{"role": "user", "content": "start"}]
    for turn in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["native", "client", "error", "other"]))
        picked = draw(st.lists(names, max_size=3))
        if kind in ("native", "client"):
            messages += search_turn(f"t{turn}", picked, style=kind)
        elif kind == "error":
            messages += search_turn(f"t{turn}", picked)
            messages[-1]["content"][0]["is_error"] = True
        else:
            messages += [{"role": "assistant", "content": "thinking"}, {"role": "user", "content": "and?"}]
    compaction = None
    if draw(st.booleans()):
        compaction = CompactionBoundary(summary="earlier", discovered_tools=tuple(draw(st.lists(names, max_size=2))))
    return ConversationState(messages, compaction)


agent_settings = st.builds(
    AgentSettings,
    mode=st.sampled_from(["", "true", "false", "auto", "auto:0", "auto:1", "auto:50", "auto:100"]),
    wire=st.sampled_from(["native", "client", "openai-hosted", "openai-client", "openai-functions"]),  # planned as native or client
    announcement_style=st.sampled_from(["full", "delta"]),
    model=st.sampled_from(["claude-sonnet-4-5", "claude-haiku-4-5"]),
    base_url=st.sampled_from(["", "https://gateway.example.com"]),
    context_window=st.sampled_from([100, 2_000, 200_000]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), catalog=catalogs(max_size=8), agent=agent_settings)
def test_request_invariants_hold_for_any_catalog_rules_and_history(data, catalog, agent):
    policy = PermissionPolicy(data.draw(rules_for(catalog)))
    state = data.draw(histories(catalog))
    before = copy.deepcopy(state.messages)
    plan = build_request(catalog, policy, agent, state, token_counter=COUNTER)
    sent = plan.tool_names
    assert state.messages == before  # pure
    assert len(sent) == len(set(sent))
    # A denied tool is never sent, announced nor searchable.
    assert all(policy.decide(name).permitted for name in sent)
    assert all(policy.decide(t.name).permitted for t in plan.searchable)
    if plan.announcement is not None:
        assert all(policy.decide(n).permitted for n in (*plan.announcement.names, *plan.announcement.added))
    # An undiscovered deferred tool is never sent.
    discovered = set(discovered_tool_names(state.messages, state.compaction))
    for name in sent:
        if name != "ToolSearch" and catalog.is_deferred(name) and plan.decision.enabled:
            assert name in discovered
    # Never a request whose tools are all deferred.
    assert not sent or any(not t.get("defer_loading") for t in plan.tools)
    # Every reference left in the history names a tool in `tools`; client style and off have none.
    referenced = referenced_tool_names(plan.messages)
    assert set(referenced) <= set(sent)
    if agent.planned_as == "client" or not plan.decision.enabled:
        assert referenced == []
    if plan.decision.enabled:
        assert "ToolSearch" in sent and not any(t.get("defer_loading") for t in plan.tools if t["name"] == "ToolSearch")
    else:
        permitted = [t.name for t in catalog if t.name != "ToolSearch" and policy.decide(t.name).permitted]
        assert sent == permitted
    json.dumps(plan.to_dict())


def test_the_profile_layout_shapes_the_announcement_and_its_tokens_are_counted(small_catalog):
    grouped = plan_for(small_catalog, messages=[{"role": "user", "content": "hi"}], announcement_layout="grouped")
    assert grouped.announcement.layout == "grouped"
    assert "mcp__github: " in grouped.system and "mcp__github__create_issue" not in grouped.system
    assert grouped.tokens.announcement_tokens == COUNTER.count_text(grouped.announcement.text)


def test_a_flat_list_that_would_not_fit_the_window_is_never_sent():
    catalog = ToolCatalog([Tool(name="Read", description="Read a file."), *(mcp(f"s{i % 40}", f"tool_number_{i}") for i in range(3000))])
    plan = plan_for(catalog, messages=[{"role": "user", "content": "hi"}], context_window=20_000)
    assert plan.announcement.layout == "budgeted" and "would" not in plan.announcement.reason
    assert "flat list of 3,000 tools" in plan.announcement.reason
    assert plan.tokens.announcement_tokens <= AgentSettings(context_window=20_000).announcement_budget_tokens
    assert "mcp__s0__tool_number_0" not in plan.system


def test_bad_layouts_and_budgets_are_refused():
    with pytest.raises(ValueError, match="layout"):
        AgentSettings(announcement_layout="tree")
    with pytest.raises(ValueError, match="announcement_budget"):
        AgentSettings(announcement_budget=-1)
    with pytest.raises(ValueError, match="at least 100"):
        AgentSettings(announcement_budget=99)


def test_while_servers_connect_and_nothing_is_deferred_toolsearch_is_sent_and_names_them():
    catalog = ToolCatalog([Tool(name="Read", description="Read a file.")])
    plan = build_request(
        catalog, PermissionPolicy(()), AgentSettings(mode="true"), ConversationState([{"role": "user", "content": "hi"}]),
        token_counter=COUNTER, pending_mcp_servers=["jira"],
    )
    assert plan.decision.gate == "pending-servers" and plan.tool_names == ["Read", "ToolSearch"]
    from playground.engine.search.keyword import ClaudeCodeKeywordBackend

    turn = plan_turn(catalog, PermissionPolicy(()), AgentSettings(mode="true"), ConversationState([{"role": "user", "content": "hi"}]),
                     token_counter=COUNTER, pending_mcp_servers=["jira"], backend=ClaudeCodeKeywordBackend())
    assert turn.run_tool_search({"query": "jira issues"}).pending_mcp_servers == ["jira"]


@pytest.mark.parametrize("layout", ["grouped", "budgeted"])
def test_toolsearch_finds_the_same_tools_whatever_names_the_announcement_shows(small_catalog, layout):
    from playground.engine.search.keyword import ClaudeCodeKeywordBackend

    state = ConversationState([{"role": "user", "content": "hi"}])
    flat = plan_turn(small_catalog, PermissionPolicy(()), AgentSettings(mode="true"), state, token_counter=COUNTER,
                     backend=ClaudeCodeKeywordBackend())
    other = plan_turn(small_catalog, PermissionPolicy(()),
                      AgentSettings(mode="true", announcement_layout=layout, announcement_budget=100), state,
                      token_counter=COUNTER, backend=ClaudeCodeKeywordBackend())
    assert other.request.announcement.layout == layout
    for query in ("github issue", "+slack message", "select:mcp__github__create_issue", "mcp__slack"):
        assert other.run_tool_search({"query": query}).matches == flat.run_tool_search({"query": query}).matches


def test_an_announcement_above_a_tenth_of_the_window_carries_a_warning():
    catalog = ToolCatalog([Tool(name="Read", description="Read a file."), *(mcp(f"s{i % 40}", f"tool_number_{i}") for i in range(300))])
    messages = [{"role": "user", "content": "hi"}]
    small_window = plan_for(catalog, messages=messages, context_window=30_000)
    assert "% of the 30,000-token context window" in small_window.announcement_warning
    assert plan_for(catalog, messages=messages).announcement_warning == ""


def test_auto_counts_the_announcement_the_request_would_carry(small_catalog):
    messages = [{"role": "user", "content": "hi"}]
    plan = plan_for(small_catalog, messages=messages, mode="auto:0")
    deferred_tokens = COUNTER.count_engine_tools([t for t in small_catalog if small_catalog.is_deferred(t.name)])
    # A window whose 10 % equals the deferred tokens: on by Claude Code's rule, off net of the announcement.
    auto = plan_for(small_catalog, messages=messages, mode="auto", context_window=deferred_tokens * 10)
    assert auto.decision.announcement_tokens == plan.tokens.announcement_tokens > 0
    assert auto.decision.enabled is False and "announcing them" in auto.decision.reason
