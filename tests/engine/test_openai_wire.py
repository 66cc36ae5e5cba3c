"""OpenAI's three wire styles, built from the same TurnPlan as Anthropic's (openai_wire.py)."""
from __future__ import annotations

import json

from playground.engine.history import CompactionBoundary, discovered_tool_names
from playground.engine.openai_wire import NAMESPACE_MAX_TOOLS, deferred_namespaces, namespace_tool_name, visible_tools
from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.tokens import CharEstimateCounter
from playground.engine.toolsearch_tool import TOOL_SEARCH_TOOL
from playground.engine.tools import Tool, ToolCatalog
from playground.engine.turn import ALLOW, REFUSE, plan_turn

COUNTER = CharEstimateCounter()
PLANNED = {"openai-hosted": "native", "openai-client": "native", "openai-functions": "client"}


def mcp(server: str, short: str, description: str = "") -> Tool:
    return Tool(name=f"mcp__{server}__{short}", description=description or f"{short} on {server}", is_mcp=True,
                input_schema={"type": "object", "properties": {"x": {"type": "string"}}})


CATALOG = ToolCatalog([
    Tool(name="Read", description="Read a file", input_schema={"type": "object", "properties": {"path": {"type": "string"}}}),
    *[mcp("big", f"op_{i}") for i in range(NAMESPACE_MAX_TOOLS + 3)],
    mcp("github", "create_issue"), mcp("github", "list_issues"), mcp("github", "delete_repo"),
    Tool(name="NotebookEdit", description="Edit a notebook", should_defer=True),
])


def turn_for(style: str, messages=None, *, rules=(), compaction=None, **values):
    values.setdefault("mode", "true")
    settings = AgentSettings(wire=style, **values)
    state = ConversationState(messages or [{"role": "user", "content": "hi"}], compaction=compaction)
    return plan_turn(CATALOG, PermissionPolicy(list(rules)), settings, state, token_counter=COUNTER)


def search_history(names, *, planned="native"):
    if planned == "native":
        content = [{"type": "tool_reference", "tool_name": n} for n in names]
    else:
        content = [{"type": "text", "text": json.dumps({"matches": names})}]
    return [
        {"role": "user", "content": "open an issue"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "issue"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": content}]},
    ]


def test_hosted_sends_tool_search_and_every_deferred_tool_in_namespaces_per_server():
    body = turn_for("openai-hosted", rules=[PermissionRule("deny", "mcp__github__delete_repo")],
                    server_descriptions={"github": "GitHub issues and repositories"}).wire_request()
    tools = body["tools"]
    assert tools[0]["name"] == "Read" and "defer_loading" not in tools[0] and tools[0]["strict"] is False
    assert {"type": "tool_search"} in tools
    namespaces = {t["name"]: t for t in tools if t["type"] == "namespace"}
    assert namespaces["mcp__github"]["description"] == "GitHub issues and repositories"
    assert [f["name"] for f in namespaces["mcp__github"]["tools"]] == ["create_issue", "list_issues"]  # denied: never sent
    assert all(f["defer_loading"] for ns in namespaces.values() for f in ns["tools"])
    # A server above the limit is split in parts, in catalog order, each under the limit.
    parts = [n for n in namespaces if n.startswith("mcp__big")]
    assert parts == ["mcp__big__1", "mcp__big__2"]
    assert [len(namespaces[p]["tools"]) for p in parts] == [NAMESPACE_MAX_TOOLS, 3]
    assert "Part 2 of 2: op_10, op_11, op_12" in namespaces["mcp__big__2"]["description"]
    loose = [t for t in tools if t.get("name") == "NotebookEdit"]
    assert loose and loose[0]["defer_loading"] is True
    assert "instructions" not in body  # no announcement: the namespaces say what is searchable
    assert body["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


def test_namespaced_calls_map_back_to_catalog_names_and_the_call_check_sees_them():
    assert namespace_tool_name("mcp__big__2", "op_11") == "mcp__big__op_11"
    assert namespace_tool_name("mcp__github", "create_issue") == "mcp__github__create_issue"
    turn = turn_for("openai-hosted", rules=[PermissionRule("deny", "mcp__github__delete_repo"),
                                            PermissionRule("ask", "mcp__github__create_issue")])
    assert turn.check_call("mcp__big__op_11").verdict == ALLOW
    assert turn.check_call("mcp__github__create_issue").needs_person
    denied = turn.check_call("mcp__github__delete_repo")
    assert denied.refused and denied.refusal == "denied"


def test_hosted_with_tool_search_off_sends_every_permitted_tool_as_a_function():
    body = turn_for("openai-hosted", mode="false").wire_request()
    assert {t["type"] for t in body["tools"]} == {"function"} and len(body["tools"]) == len(CATALOG)


def test_client_sends_toolsearch_as_a_client_tool_search_and_no_deferred_tool():
    turn = turn_for("openai-client")
    body = turn.wire_request()
    search = [t for t in body["tools"] if t["type"] == "tool_search"]
    assert search == [{"type": "tool_search", "execution": "client", "description": TOOL_SEARCH_TOOL.description,
                       "parameters": dict(TOOL_SEARCH_TOOL.input_schema)}]
    assert [t.get("name") for t in body["tools"] if t["type"] == "function"] == ["Read"]
    assert "<available-deferred-tools>" in body["instructions"] and "mcp__github__create_issue" in body["instructions"]
    assert turn.check_call("ToolSearch").verdict == ALLOW
    assert turn.check_call("mcp__github__create_issue").refusal == "deferred"


def test_client_answers_a_search_with_a_tool_search_output_of_the_loaded_definitions():
    turn = turn_for("openai-client", search_history(["mcp__github__create_issue"]))
    body = turn.wire_request()
    call, output = body["input"][1], body["input"][2]
    assert call == {"type": "tool_search_call", "call_id": "toolu_1", "arguments": {"query": "issue"},
                    "execution": "client", "status": "completed"}
    assert output["type"] == "tool_search_output" and output["call_id"] == "toolu_1" and output["execution"] == "client"
    assert [t["name"] for t in output["tools"]] == ["mcp__github__create_issue"]
    assert output["tools"][0]["parameters"] == dict(CATALOG.get("mcp__github__create_issue").input_schema)
    # Loaded by the output in the input, not repeated in tools; callable.
    assert "mcp__github__create_issue" not in [t.get("name") for t in body["tools"]]
    assert turn.check_call("mcp__github__create_issue").verdict == ALLOW


def test_a_tool_only_a_compaction_carried_goes_as_an_ordinary_function():
    boundary = CompactionBoundary("earlier work", discovered_tools=("mcp__github__list_issues",))
    body = turn_for("openai-client", compaction=boundary).wire_request()
    assert "mcp__github__list_issues" in [t.get("name") for t in body["tools"]]
    assert "<conversation-summary>" in body["input"][0]["content"][0]["text"]


def test_discovered_tools_are_recovered_from_tool_search_output_items_and_denied_ones_dropped():
    history = [
        {"role": "user", "content": "hi"},
        {"type": "tool_search_call", "id": "ts_1", "call_id": "call_1", "arguments": {"query": "github"},
         "execution": "server", "status": "completed"},
        {"type": "tool_search_output", "call_id": "call_1", "execution": "server", "status": "completed", "tools": [
            {"type": "namespace", "name": "mcp__github", "description": "GitHub", "tools": [
                {"type": "function", "name": "create_issue", "defer_loading": True},
                {"type": "function", "name": "delete_repo", "defer_loading": True}]},
            {"type": "function", "name": "NotebookEdit"}]},
    ]
    assert discovered_tool_names(history) == ["mcp__github__create_issue", "mcp__github__delete_repo", "NotebookEdit"]
    turn = turn_for("openai-client", history, rules=[PermissionRule("deny", "mcp__github__delete_repo")])
    assert turn.request.discovered_tools == ["mcp__github__create_issue", "NotebookEdit"]
    body = turn.wire_request()
    kept = body["input"][2]["tools"]
    assert [t.get("name") for t in kept] == ["NotebookEdit"]  # the namespace held a denied tool: dropped whole
    assert turn.check_call("mcp__github__delete_repo").refused
    assert turn.check_call("NotebookEdit").verdict == ALLOW


def test_functions_style_is_a_chat_completions_body_with_a_plain_toolsearch_function():
    turn = turn_for("openai-functions", search_history(["mcp__github__create_issue"], planned="client"))
    body = turn.wire_request()
    assert set(body) == {"model", "max_completion_tokens", "messages", "tools"}
    assert [t["function"]["name"] for t in body["tools"]] == ["Read", "ToolSearch", "mcp__github__create_issue"]
    system, user, assistant, tool = body["messages"]
    assert system["role"] == "system" and "<available-deferred-tools>" in system["content"]
    assert assistant["tool_calls"][0]["function"] == {"name": "ToolSearch", "arguments": json.dumps({"query": "issue"})}
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": json.dumps({"matches": ["mcp__github__create_issue"]})}
    assert turn.check_call("mcp__github__create_issue").verdict == ALLOW
    assert turn.check_call("mcp__github__list_issues").verdict == REFUSE


def test_the_model_sees_a_deferred_namespace_by_its_name_and_description_only():
    namespaces = deferred_namespaces([mcp("github", "create_issue")], {"github": "GitHub"})
    assert visible_tools({"tools": namespaces}) == [{"type": "namespace", "name": "mcp__github", "description": "GitHub"}]


def test_hosted_turns_an_earlier_toolsearch_of_ours_into_a_marker_not_a_client_search_call():
    body = turn_for("openai-hosted", search_history(["mcp__github__create_issue"])).wire_request()
    assert [item["type"] for item in body["input"]] == ["message", "message"]
    assert body["input"][1]["content"] == [{"type": "input_text", "text": "[ToolSearch loaded: mcp__github__create_issue]"}]


def test_hosted_sends_no_announcement_even_a_delta_one_stored_in_the_history():
    stored = "<available-deferred-tools>\nmcp__github__create_issue\n</available-deferred-tools>"
    history = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": stored}]},
               {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    body = turn_for("openai-hosted", history, announcement_style="delta").wire_request()
    assert "available-deferred-tools" not in json.dumps(body["input"])
    client = turn_for("openai-client", history, announcement_style="delta").wire_request()
    assert "available-deferred-tools" in json.dumps(client["input"])  # the client style announces, as Claude's native


def test_wire_tokens_count_what_each_openai_style_sends_by_one_counter():
    from playground.engine.openai_wire import chat_functions, hosted_searches, tool_tokens_by_vendor
    from playground.engine.wires.registry import settings_for_vendor

    for style in PLANNED:
        turn = turn_for(style)
        tokens = turn.wire_tokens
        assert tokens.sent_tokens == COUNTER.count_tools(visible_tools(turn.wire_request()))
        assert tokens.baseline_tokens == turn.tokens.baseline_tokens  # every permitted tool in full: one baseline
        # The hosted style sends no announcement (its namespaces say what is searchable); the others do.
        assert (turn.wire_announcement is None) is (style == "openai-hosted")
        assert tokens.announcement_tokens == (0 if style == "openai-hosted" else turn.tokens.announcement_tokens > 0 and
                                              turn.tokens.announcement_tokens)
    anthropic = plan_turn(CATALOG, PermissionPolicy([]), AgentSettings(mode="true"), ConversationState(), token_counter=COUNTER)
    assert anthropic.wire_tokens == anthropic.tokens and anthropic.wire_announcement is anthropic.request.announcement

    # A profile's style as OpenAI runs it, with the deployment's model for a Claude model name.
    hosted = settings_for_vendor(AgentSettings(wire="server", server_search="bm25"), "openai", "gpt-5.4")
    assert (hosted.wire, hosted.server_search, hosted.planned_as) == ("openai-hosted", "", "native")
    adapted = settings_for_vendor(AgentSettings(wire="client"), "openai", "gpt-5.4")
    assert (adapted.wire, adapted.planned_as, adapted.model) == ("openai-functions", "client", "gpt-5.4")
    kept = settings_for_vendor(AgentSettings(wire="native", model="my-local-model", base_url="https://gw"), "openai", "gpt-5.4")
    assert (kept.wire, kept.model, kept.base_url) == ("openai-client", "my-local-model", "")  # a model of no known vendor stays

    # A hosted search in a response: its query and what it loaded, by catalog name.
    items = [{"type": "tool_search_call", "call_id": "c1", "arguments": {"query": "issue"}, "execution": "server"},
             {"type": "tool_search_output", "call_id": "c1", "execution": "server", "status": "completed",
              "tools": [{"type": "namespace", "name": "mcp__github", "tools": [{"type": "function", "name": "create_issue"}]}]},
             {"type": "tool_search_call", "call_id": "c2", "arguments": {"query": "x"}, "execution": "client"}]
    assert [(s.call_id, s.arguments, s.loaded) for s in hosted_searches(items)] == [("c1", {"query": "issue"}, ["mcp__github__create_issue"])]

    tools = [CATALOG.get("Read").to_api()]
    assert tool_tokens_by_vendor(tools, COUNTER) == {"anthropic": COUNTER.count_tools(tools),
                                                     "openai": COUNTER.count_tools(chat_functions(tools))}
