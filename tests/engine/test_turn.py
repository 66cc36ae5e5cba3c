"""plan_turn: the one engine entry per turn (mode decision, request plan, tokens, bound ToolSearch)."""
from __future__ import annotations

import pytest

from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState, build_request
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.usage import UsageLog
from playground.engine.tokens import CharEstimateCounter
from playground.engine.toolsearch_tool import ToolSearchInputError
from playground.engine.turn import ALLOW, TurnPlan, plan_turn

COUNTER = CharEstimateCounter()
HELLO = ConversationState([{"role": "user", "content": "hi"}])


def turn_for(catalog, *, rules=(), state=HELLO, backend=None, **settings_values):
    settings_values.setdefault("mode", "true")
    return plan_turn(catalog, PermissionPolicy(list(rules)), AgentSettings(**settings_values), state, token_counter=COUNTER,
                     backend=backend or ClaudeCodeKeywordBackend(), pending_mcp_servers=["jira"])


def test_the_turn_carries_the_request_plan_the_engine_builds(small_catalog):
    turn = turn_for(small_catalog)
    plan = build_request(small_catalog, PermissionPolicy([]), AgentSettings(mode="true"), HELLO, token_counter=COUNTER,
                         pending_mcp_servers=["jira"])
    assert isinstance(turn, TurnPlan)
    assert turn.request.to_dict() == plan.to_dict()
    assert turn.decision == plan.decision and turn.decision.enabled and turn.decision.reason
    assert turn.tokens == plan.tokens and turn.tokens.saved_tokens == plan.tokens.saved_tokens
    assert turn.searchable is turn.request.searchable


@pytest.mark.parametrize(
    ("settings_values", "rules", "gate"),
    [
        ({"mode": "false"}, (), "disabled"),
        ({"mode": "true"}, (PermissionRule("deny", "ToolSearch"),), "tool-search-denied"),
        ({"mode": "", "base_url": "https://gateway.example.com"}, (), "third-party-base-url"),
        ({"mode": "auto:100"}, (), "auto-never"),
    ],
)
def test_the_mode_decision_and_its_reason(small_catalog, settings_values, rules, gate):
    turn = turn_for(small_catalog, rules=rules, **settings_values)
    assert turn.decision.gate == gate and not turn.decision.enabled and turn.decision.reason
    assert len(turn.searchable) == 0  # off: ToolSearch searches nothing
    assert "mcp__github__create_issue" in turn.permitted  # but the permitted tools are still known (the inspector)


def test_the_bound_toolsearch_searches_permitted_tools_and_names_pending_servers(small_catalog):
    turn = turn_for(small_catalog, rules=[PermissionRule("deny", "mcp__slack")], max_results=1)
    assert turn.run_tool_search({"query": "+slack"}).matches == []
    assert turn.run_tool_search({"query": "+slack"}).pending_mcp_servers == ["jira"]
    assert turn.run_tool_search({"query": "github"}).matches == ["mcp__github__create_issue"]  # max_results from the settings
    assert turn.run_tool_search({"query": "+slack"}, over=small_catalog).matches  # another set, same backend
    with pytest.raises(ToolSearchInputError):
        turn.run_tool_search({"query": "github", "max_results": 0})


def test_the_bound_toolsearch_passes_the_usage_log(small_catalog):
    seen = []

    class Recording(ClaudeCodeKeywordBackend):
        def search(self, query, catalog, **kwargs):
            seen.append(kwargs.get("usage"))
            return super().search(query, catalog, **kwargs)

    usage = UsageLog.from_pairs([("open a ticket", "mcp__github__create_issue")])
    turn = plan_turn(small_catalog, PermissionPolicy([]), AgentSettings(mode="true"), HELLO, token_counter=COUNTER,
                     backend=Recording(), usage=usage)
    turn.run_tool_search({"query": "ticket"})
    assert seen == [usage]


def test_the_bound_toolsearch_can_answer_with_another_backend(small_catalog):
    class Named(ClaudeCodeKeywordBackend):
        name = "other"

    turn = turn_for(small_catalog, rules=[PermissionRule("deny", "mcp__slack")], max_results=1)
    other = turn.run_tool_search({"query": "+slack"}, backend=Named())
    assert other.backend == "other" and other.matches == []  # the turn's permissions still hold
    assert other.pending_mcp_servers == ["jira"]
    assert turn.run_tool_search({"query": "github"}, backend=Named()).matches == ["mcp__github__create_issue"]


def test_a_turn_without_a_backend_answers_no_toolsearch(small_catalog):
    turn = plan_turn(small_catalog, PermissionPolicy([]), AgentSettings(mode="true"), token_counter=COUNTER)
    assert turn.request.messages == []  # no state: an empty conversation
    with pytest.raises(ValueError, match="without a search backend"):
        turn.run_tool_search({"query": "github"})


def test_a_filter_the_caller_already_has_is_used_as_is(small_catalog):
    policy = PermissionPolicy([PermissionRule("deny", "mcp__fs")])
    filtered = policy.filter(small_catalog)
    turn = plan_turn(small_catalog, policy, AgentSettings(mode="true"), HELLO, token_counter=COUNTER, filtered=filtered)
    assert turn.decision.enabled and turn.permitted is filtered.permitted
    assert "request" not in vars(turn)  # the decision alone (the inspector) builds no request
    assert turn.decision == turn.request.decision
    assert turn.request.to_dict() == turn_for(small_catalog, rules=policy.rules).request.to_dict() | {"pending_mcp_servers": []}


@pytest.mark.parametrize("layout", ["flat", "grouped"])
def test_auto_mode_builds_the_announcement_once_and_sends_the_one_it_weighed(small_catalog, monkeypatch, layout):
    # Building an announcement lays out every deferred name (100,000 at scale): the mode decision
    # and the request share one.
    from playground.engine import announcements, requests

    calls = []
    real = announcements.announce
    monkeypatch.setattr(requests, "announce", lambda *a, **k: calls.append(a) or real(*a, **k))
    turn = turn_for(small_catalog, mode="auto:1", context_window=1000, announcement_style="full", announcement_layout=layout)
    assert turn.decision.enabled and turn.decision.announcement_tokens > 0
    assert turn.request.announcement is not None
    assert len(calls) == 1
    assert turn.decision.announcement_tokens == turn.tokens.announcement_tokens


# -- the call-time question and the final wire request ---------------------------------------------------
GITHUB = "mcp__github__create_issue"


def found(name: str, *, style: str = "native") -> ConversationState:
    """A history in which a `select:` ToolSearch found `name`."""
    content = ([{"type": "tool_reference", "tool_name": name}] if style == "native"
               else [{"type": "text", "text": f'{{"matches": ["{name}"]}}'}])
    return ConversationState([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": f"select:{name}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}]},
    ])


def test_check_call_allows_a_sent_tool_with_its_definition(small_catalog):
    check = turn_for(small_catalog).check_call("Read")
    assert (check.verdict, check.message, check.refusal) == (ALLOW, "", "")
    assert check.tool is small_catalog.get("Read") and check.permission.effect == "allow"


def test_check_call_refuses_a_deferred_tool_until_a_search_found_it(small_catalog):
    check = turn_for(small_catalog).check_call(GITHUB)
    assert check.refused and check.refusal == "deferred" and f"select:{GITHUB}" in check.message and check.tool is None
    assert turn_for(small_catalog, state=found(GITHUB)).check_call(GITHUB).verdict == ALLOW
    # Found outside the history (the gateway's session keeps them): callable while still deferred.
    assert turn_for(small_catalog).check_call(GITHUB, discovered=[GITHUB]).verdict == ALLOW
    assert turn_for(small_catalog).check_call("Read", discovered=["Nope"]).verdict == ALLOW
    assert turn_for(small_catalog).check_call("Nope", discovered=["Nope"]).refusal == "unknown"


def test_check_call_refuses_denied_and_unknown_tools_and_asks_where_a_rule_asks(small_catalog):
    turn = turn_for(small_catalog, rules=[PermissionRule("deny", "Bash"), PermissionRule("ask", "Read")])
    denied = turn.check_call("Bash")
    assert denied.refused and denied.refusal == "denied" and "denied by a permission rule" in denied.message
    assert denied.permission.effect == "deny"
    assert turn.check_call(GITHUB, discovered=[GITHUB]).verdict == ALLOW
    asked = turn.check_call("Read")
    assert asked.needs_person and asked.tool is small_catalog.get("Read") and asked.message == asked.permission.reason
    unknown = turn.check_call("Nope")
    assert unknown.refusal == "unknown" and "does not exist" in unknown.message


def test_check_call_for_toolsearch_follows_the_mode_and_the_server_side_search(small_catalog):
    assert turn_for(small_catalog).check_call("ToolSearch").verdict == ALLOW
    assert turn_for(small_catalog, mode="false").check_call("ToolSearch").refusal == "unknown"
    server = turn_for(small_catalog, wire="server", server_search="bm25")
    assert server.check_call("ToolSearch").refusal == "server_search"
    # Every deferred tool goes with defer_loading: the server's search may load any of them.
    assert server.check_call(GITHUB).verdict == ALLOW
    assert server.check_call("tool_search_tool_bm25").refusal == "unknown"


@pytest.mark.parametrize("wire_style", ["native", "client"])
def test_the_wire_request_of_native_and_client_styles_is_the_plan_with_its_max_tokens(small_catalog, wire_style):
    turn = turn_for(small_catalog, state=found(GITHUB, style=wire_style), wire=wire_style, max_tokens=1234,
                    system_prompt="Be brief.")
    request = turn.wire_request()
    assert turn.wire == wire_style == turn.request.planned_as
    assert request == turn.request.to_api_kwargs() and request["max_tokens"] == 1234
    assert [t["name"] for t in request["tools"]] == turn.request.tool_names
    assert request["system"].startswith("Be brief.") and request["messages"] == turn.request.messages
    request["model"] = "changed"
    assert turn.wire_request()["model"] == "claude-sonnet-4-5"  # a new dict each call


def test_the_server_wire_request_replaces_toolsearch_and_sends_every_deferred_tool(small_catalog):
    turn = turn_for(small_catalog, wire="server", server_search="regex", max_tokens=777)
    request = turn.wire_request()
    assert turn.wire == "server" and turn.request.planned_as == "native" and turn.style.vendor == "anthropic"
    tools = {t["name"]: t for t in request["tools"]}
    assert "ToolSearch" not in tools and tools["tool_search_tool_regex"]["type"] == "tool_search_tool_regex_20251119"
    assert {n for n, t in tools.items() if t.get("defer_loading")} == {t.name for t in small_catalog.deferred}
    assert request["max_tokens"] == 777
    off = turn_for(small_catalog, wire="server", server_search="regex", mode="false")
    assert off.wire_request() == off.request.to_api_kwargs()  # search off: nothing to replace


def test_settings_refuse_a_server_variant_they_cannot_send():
    with pytest.raises(ValueError, match="unknown server-side search tool 'nope'"):
        AgentSettings(wire="server", server_search="nope")
    with pytest.raises(ValueError, match="the server wire style needs a server-side search tool"):
        AgentSettings(wire="server")
    with pytest.raises(ValueError, match="needs the server wire style, not client"):
        AgentSettings(server_search="bm25", wire="client")
    with pytest.raises(ValueError, match="unknown wire style 'pigeon' \\(expected one of native, client, server, openai-hosted"):
        AgentSettings(wire="pigeon")
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        AgentSettings(max_tokens=0)


def test_the_permitted_servers_are_those_with_a_permitted_tool(small_catalog):
    servers = {tool.server for tool in small_catalog if tool.server}
    assert "slack" in servers and "github" in servers
    everything = turn_for(small_catalog)
    assert everything.permitted_servers == tuple(sorted(servers))
    denied = turn_for(small_catalog, rules=[PermissionRule("deny", "mcp__slack")])
    assert "slack" not in denied.permitted_servers and "github" in denied.permitted_servers
    one_tool = turn_for(small_catalog, rules=[PermissionRule("deny", "mcp__github__create_issue")])
    others_of_github = [t.name for t in small_catalog if t.server == "github" and t.name != "mcp__github__create_issue"]
    assert ("github" in one_tool.permitted_servers) == bool(others_of_github)
