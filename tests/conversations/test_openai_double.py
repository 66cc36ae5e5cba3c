"""The Responses / Chat Completions double (testing/fake_openai.py), the real `openai` SDK against it,
and every request body the `request` command prints for the six wire styles validated by the doubles."""
from __future__ import annotations

import copy
import json

import openai
import pytest

from playground.conversations.testing.fake_api import InvalidRequest as AnthropicInvalidRequest
from playground.conversations.testing.fake_api import validate_messages_request
from playground.conversations.testing.fake_openai import (
    FakeOpenAIAPI,
    InvalidRequest,
    chat_reply,
    function_call_item,
    hosted_search_reply,
    message_item,
    response_reply,
    tool_search_call_item,
    validate_chat_request,
    validate_responses_request,
)
from playground.engine.catalog_io import load_catalog
from playground.toolsearch.cli import REQUEST_WIRE_STYLES
from playground.engine.openai_wire import called_tool_name, tool_search_output_item
from playground.engine.wires.registry import by_command_name
from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.turn import ALLOW, plan_turn
from playground.registry.demo_data import CATALOGS
from tests.cli_runner import run_cli

COUNTER = CharEstimateCounter()
DEMO = load_catalog(CATALOGS[0])
FUNCTION = {"type": "function", "name": "lookup", "description": "d", "parameters": {"type": "object", "properties": {}}, "strict": False}
DEFERRED = {**FUNCTION, "name": "later", "defer_loading": True}
HI = [{"type": "message", "role": "user", "content": "hi"}]


def responses_body(tools=(), items=HI) -> dict:
    return {"model": "gpt-test", "input": list(items), "tools": list(tools), "max_output_tokens": 1024}


@pytest.fixture
def api():
    with FakeOpenAIAPI() as server:
        yield server


@pytest.fixture
def client(api):
    return openai.OpenAI(api_key="test-key", base_url=api.url, max_retries=0, timeout=30)


# -- the validators ------------------------------------------------------------------------------------------
def test_a_valid_request_passes():
    validate_responses_request(responses_body([FUNCTION, DEFERRED, {"type": "tool_search"}]))


@pytest.mark.parametrize(("body", "message"), [
    (responses_body([FUNCTION, DEFERRED]), "require a tool_search tool"),
    (responses_body([{"type": "namespace", "name": "mcp__x", "description": "x", "defer_loading": True,
                      "tools": [{**FUNCTION, "defer_loading": True}]}]), "require a tool_search tool"),
    (responses_body([{"type": "tool_search"}, {"type": "namespace", "name": "crm", "description": "CRM", "tools": []}]),
     "at least one function"),
    (responses_body([FUNCTION, FUNCTION]), "Duplicate function name 'lookup'"),
    (responses_body([{"type": "namespace", "name": "crm", "description": "c", "tools": [FUNCTION, FUNCTION]}]),
     "Duplicate function name 'lookup' in namespace"),
    (responses_body([{"type": "tool_search"}, {"type": "tool_search", "execution": "client"}]), "Only one tool_search"),
    (responses_body([{"type": "tool_search", "parameters": {"type": "object"}}]), "only supported for tool_search with execution 'client'"),
    (responses_body([{"type": "gadget"}]), "Invalid value: 'gadget'"),
    (responses_body([FUNCTION], [*HI, {"type": "telepathy_call"}]), "Invalid value: 'telepathy_call'"),
    (responses_body([{"type": "tool_search", "execution": "client"}], [
        *HI, {"type": "tool_search_output", "call_id": "call_nowhere", "execution": "client", "tools": []}]),
     "No tool_search_call found for tool_search_output with call_id call_nowhere"),
    (responses_body([FUNCTION], [*HI, {"type": "function_call_output", "call_id": "call_x", "output": "x"}]),
     "No tool call found for function call output with call_id call_x"),
    (responses_body([FUNCTION], [*HI, {"type": "function_call", "call_id": "call_y", "name": "lookup", "arguments": "{}"}]),
     "No tool output found for function call call_y"),
    (responses_body([{**FUNCTION, "name": "has space"}]), "does not match pattern"),
])
def test_the_responses_validator_rejects_what_the_real_api_rejects(body, message):
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(")):
        validate_responses_request(body)


@pytest.mark.parametrize(("body", "message"), [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]}, "Duplicate function name"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "a", "defer_loading": True}}]}, "Unrecognized request argument"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "r"}]},
     "must be a response to a preceeding message"),
])
def test_the_chat_validator_rejects_what_the_real_api_rejects(body, message):
    with pytest.raises(InvalidRequest, match=message):
        validate_chat_request(body)


def test_a_rejected_request_reaches_the_sdk_as_a_bad_request_error(api, client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**responses_body([FUNCTION, DEFERRED]))
    assert "require a tool_search tool" in str(caught.value) and api.requests[-1].status == 400


# -- every body the request command prints ---------------------------------------------------------------------
@pytest.mark.parametrize("wire", list(REQUEST_WIRE_STYLES))
@pytest.mark.parametrize("discovered", ["", "mcp__github__create_issue,mcp__github__list_issues"])
def test_every_printed_body_is_valid_and_is_what_the_sdk_sends(wire, discovered, api, client):
    args = ["request", "--catalog", CATALOGS[0], "--wire", wire, "--json"] + (["--discovered", discovered] if discovered else [])
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)["request"]
    style = by_command_name(wire)
    if style.vendor == "anthropic":
        # a style that needs betas prints them as the SDK's beta call takes them; the API reads them as a header
        sent = {key: value for key, value in body.items() if key != "betas"}
        assert set(body.get("betas", ())) == set(style.betas)
        validate_messages_request(sent, betas=frozenset(body.get("betas", ())))
        return
    if style.api == "responses":
        api.script(response_reply([message_item("ok")]))
        client.responses.create(**copy.deepcopy(body))
    else:
        api.script(chat_reply("ok"))
        client.chat.completions.create(**copy.deepcopy(body))
    assert api.requests[-1].status == 200, api.requests[-1].error
    assert api.requests[-1].body == body  # exactly what the SDK sent


def test_the_anthropic_validator_catches_a_broken_body():
    with pytest.raises(AnthropicInvalidRequest):
        validate_messages_request({"model": "m", "max_tokens": 10, "messages": [], "tools": []})


# -- conversations through the real SDK ---------------------------------------------------------------------------
def settings_for(style: str) -> AgentSettings:
    fields = REQUEST_WIRE_STYLES[style]
    return AgentSettings(mode="true", model="gpt-test", **fields)


def drive_responses(style, client, history, *, rules=(), rounds=4):
    """A minimal agent loop on the Responses API: our backend answers client searches, tools 'run'."""
    backend = ClaudeCodeKeywordBackend()
    ran = []
    for _ in range(rounds):
        turn = plan_turn(DEMO, PermissionPolicy(list(rules)), settings_for(style), ConversationState(history),
                         token_counter=COUNTER, backend=backend)
        response = client.responses.create(**turn.wire_request())
        items = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        history = [*history, *items]
        calls = [i for i in items if i["type"] == "function_call" or (i["type"] == "tool_search_call" and i["execution"] == "client")]
        if not calls:
            return history, ran, turn
        for item in calls:
            if item["type"] == "tool_search_call":
                result = turn.run_tool_search(item["arguments"])
                history.append(tool_search_output_item(item["call_id"], result.matches, turn.permitted.get))
                continue
            check = turn.check_call(called_tool_name(item))
            ran.append((check.name, check.verdict))
            history.append({"type": "function_call_output", "call_id": item["call_id"],
                            "output": "done" if check.verdict == ALLOW else check.message})
    raise AssertionError("the conversation did not end")


def test_client_style_search_load_call_through_the_sdk(api, client):
    api.script(
        response_reply([tool_search_call_item({"query": "select:mcp__github__create_issue"})]),
        response_reply([function_call_item("mcp__github__create_issue", {"owner": "o", "repo": "r", "title": "t"})]),
        response_reply([message_item("Opened the issue.")]),
    )
    history, ran, last = drive_responses("openai-client", client, [{"role": "user", "content": "open an issue"}])
    assert ran == [("mcp__github__create_issue", ALLOW)]
    assert [r.status for r in api.requests] == [200, 200, 200]
    second = api.requests[1].body
    output = next(i for i in second["input"] if i["type"] == "tool_search_output")
    assert [t["name"] for t in output["tools"]] == ["mcp__github__create_issue"]
    assert "mcp__github__create_issue" not in [t.get("name") for t in second["tools"]]  # loaded by the output, not resent
    assert last.request.discovered_tools == ["mcp__github__create_issue"]


def test_a_call_before_the_search_loaded_it_is_refused_with_the_deferred_message(api, client):
    api.script(
        response_reply([function_call_item("mcp__github__create_issue", {})]),
        response_reply([message_item("ok")]),
    )
    _, ran, _ = drive_responses("openai-client", client, [{"role": "user", "content": "open an issue"}])
    assert ran == [("mcp__github__create_issue", "refuse")]
    outputs = [i for i in api.requests[1].body["input"] if i["type"] == "function_call_output"]
    assert "select:mcp__github__create_issue" in outputs[0]["output"]


def test_hosted_style_openai_searches_and_the_namespaced_call_maps_back(api, client):
    api.script(
        hosted_search_reply("github issue", ["mcp__github__create_issue"],
                            then=[function_call_item("create_issue", {"title": "t"}, namespace="mcp__github")]),
        response_reply([message_item("Opened.")]),
    )
    history, ran, last = drive_responses("openai-hosted", client, [{"role": "user", "content": "open an issue"}],
                                         rules=[PermissionRule("deny", "mcp__github__delete_repository")])
    assert ran == [("mcp__github__create_issue", ALLOW)]
    first = api.requests[0].body
    sent = {f["name"] for t in first["tools"] if t["type"] == "namespace" for f in t["tools"]}
    assert "create_issue" in sent and "delete_repository" not in sent  # denied: never sent, never searchable
    assert last.request.discovered_tools == ["mcp__github__create_issue"]  # recovered from the server's output


def test_functions_style_through_chat_completions(api, client):
    settings = settings_for("openai-functions")
    api.script(chat_reply(tool_calls=[("ToolSearch", {"query": "select:mcp__github__create_issue"})]), chat_reply("found it"))
    history = [{"role": "user", "content": "open an issue"}]
    turn = plan_turn(DEMO, PermissionPolicy(), settings, ConversationState(history), token_counter=COUNTER,
                     backend=ClaudeCodeKeywordBackend())
    reply = client.chat.completions.create(**turn.wire_request())
    call = reply.choices[0].message.tool_calls[0]
    result = turn.run_tool_search(json.loads(call.function.arguments))
    history += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": "ToolSearch",
                                           "input": json.loads(call.function.arguments)}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": [{"type": "text", "text": json.dumps(result.to_output())}]}]},
    ]
    turn = plan_turn(DEMO, PermissionPolicy(), settings, ConversationState(history), token_counter=COUNTER)
    client.chat.completions.create(**turn.wire_request())
    assert [r.status for r in api.requests] == [200, 200]
    names = [t["function"]["name"] for t in api.requests[1].body["tools"]]
    assert "mcp__github__create_issue" in names


def test_the_same_query_finds_the_same_tools_whoever_asks():
    backend = ClaudeCodeKeywordBackend()
    found = {}
    for style in REQUEST_WIRE_STYLES:
        if style == "anthropic-server":
            continue  # Anthropic searches there, not our backend
        turn = plan_turn(DEMO, PermissionPolicy([PermissionRule("deny", "mcp__github__create_issue")]), settings_for(style),
                         token_counter=COUNTER, backend=backend)
        found[style] = turn.run_tool_search({"query": "github issue", "max_results": 5}).matches
    assert len({tuple(m) for m in found.values()}) == 1 and found["openai-client"]
    assert "mcp__github__create_issue" not in found["openai-client"]
