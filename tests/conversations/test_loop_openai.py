"""The loop with the OpenAI provider: the real `openai` SDK against the Responses / Chat Completions
double (testing/fake_openai.py), one profile per wire style (native → openai-client, client →
openai-functions, server → openai-hosted)."""
from __future__ import annotations

import pytest

from playground.conversations.providers.openai_api import OpenAIProvider
from playground.conversations.testing.fake_openai import (
    FakeOpenAIAPI,
    chat_reply,
    function_call_item,
    hosted_search_reply,
    message_item,
    response_reply,
    tool_search_call_item,
)
from tests.conversations.conftest import converse, events_of, make_profile

TIME = "mcp__time__get_current_time"


@pytest.fixture
def openai_api():
    with FakeOpenAIAPI() as server:
        yield server


@pytest.fixture
def gpt(openai_api):
    return OpenAIProvider(api_key="sk-test", base_url=openai_api.url, model="gpt-test", max_retries=1, timeout=10)


def test_client_style_our_backend_answers_the_search_and_the_tool_runs(admin_user, tool_world, native_profile, openai_api, gpt):
    openai_api.script(
        response_reply([tool_search_call_item({"query": f"select:{TIME}"}, call_id="call_s")]),
        response_reply([function_call_item(TIME, {"timezone": "Asia/Tokyo"}, call_id="call_t")]),
        response_reply([message_item("It is noon in Tokyo.")]),
    )
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=native_profile, provider=gpt)
    assert outcome.reason == "end_turn", [r.error for r in openai_api.requests]
    first, second, third = (r.body for r in openai_api.requests)
    assert all(r.status == 200 for r in openai_api.requests)
    assert first["model"] == "gpt-test" and {"type": "tool_search"}.items() <= first["tools"][-1].items()
    assert TIME in first["instructions"] and TIME not in [t.get("name") for t in first["tools"]]
    output = next(i for i in second["input"] if i["type"] == "tool_search_output")
    assert output["call_id"] == "call_s" and [t["name"] for t in output["tools"]] == [TIME]
    assert any(i["type"] == "function_call_output" and i["call_id"] == "call_t" for i in third["input"])
    request_event = events_of(conversation, "model_request")[1].payload
    assert request_event["message_count"] == len(second["input"])
    assert request_event["request"]["max_tokens"] == first["max_output_tokens"]
    assert events_of(conversation, "toolsearch_query")[0].payload["loaded"] == [TIME]
    assert [t.payload["discovered_tools"] for t in events_of(conversation, "turn_started")] == [[], [TIME], [TIME]]
    result = events_of(conversation, "tool_result")[0]
    assert result.payload["name"] == TIME and not result.payload["is_error"]


def test_hosted_style_openai_searches_and_a_namespaced_call_runs(admin_user, tool_world, openai_api, gpt):
    profile = make_profile("server", wire_style="server")
    openai_api.script(
        hosted_search_reply("time tokyo", [TIME], then=[function_call_item("get_current_time", {"timezone": "Asia/Tokyo"},
                                                                         namespace="mcp__time", call_id="call_t")]),
        response_reply([message_item("Noon.")]),
    )
    conversation, outcome = converse(admin_user, "Time in Tokyo?", profile=profile, provider=gpt)
    assert outcome.reason == "end_turn", [r.error for r in openai_api.requests]
    first, second = (r.body for r in openai_api.requests)
    namespaces = {t["name"] for t in first["tools"] if t["type"] == "namespace"}
    assert "mcp__time" in namespaces and {"type": "tool_search"} in first["tools"]
    kinds = [i["type"] for i in second["input"]]
    assert kinds.index("tool_search_call") < kinds.index("tool_search_output") < kinds.index("function_call_output")
    assert next(i for i in second["input"] if i["type"] == "function_call")["namespace"] == "mcp__time"
    assert events_of(conversation, "tool_result")[0].payload["name"] == TIME
    assert events_of(conversation, "turn_started")[1].payload["discovered_tools"] == [TIME]
    # The request's tools array holds namespaces (a server's tools in one entry) and tool_search: its
    # length is not the tools sent, and the page says which it counts (it said "9 tools" beside "14 sent").
    from playground.conversations.fragments import render_event_frame

    request_event = events_of(conversation, "model_request")[0]
    assert request_event.payload["tool_count"] == len(first["tools"])
    frame = render_event_frame(conversation, request_event)
    assert f"{len(first['tools'])} entries in its tools list" in frame and "one namespace entry holds a server" in frame


def test_functions_style_runs_over_chat_completions(admin_user, tool_world, client_profile, openai_api, gpt):
    openai_api.script(
        chat_reply(tool_calls=[("ToolSearch", {"query": f"select:{TIME}"})]),
        chat_reply(tool_calls=[(TIME, {"timezone": "Asia/Tokyo"})]),
        chat_reply("Noon."),
    )
    conversation, outcome = converse(admin_user, "Time in Tokyo?", profile=client_profile, provider=gpt)
    assert outcome.reason == "end_turn", [r.error for r in openai_api.requests]
    assert [r.path for r in openai_api.requests] == ["/v1/chat/completions"] * 3
    second = openai_api.requests[1].body
    assert TIME in [t["function"]["name"] for t in second["tools"]]
    assert events_of(conversation, "tool_result")[0].payload["name"] == TIME


def test_an_ask_rule_pauses_the_openai_run_for_a_person(admin_user, tool_world, native_profile, openai_api, gpt):
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(profile=native_profile, effect="ask", pattern=TIME)
    openai_api.script(
        response_reply([tool_search_call_item({"query": f"select:{TIME}"})]),
        response_reply([function_call_item(TIME, {"timezone": "Asia/Tokyo"})]),
    )
    conversation, outcome = converse(admin_user, "Time in Tokyo?", profile=native_profile, provider=gpt)
    assert outcome.reason == "waiting"
    assert events_of(conversation, "permission_prompt")


def test_without_a_key_the_provider_is_unavailable_with_the_reason(settings):
    settings.OPENAI_API_KEY = ""
    assert OpenAIProvider.unavailable_reason() == "no API key: set OPENAI_API_KEY"
    settings.OPENAI_API_KEY = "sk-x"
    assert OpenAIProvider.unavailable_reason() == ""


@pytest.mark.parametrize("style", ["native", "server"])
def test_compaction_carries_the_tools_an_openai_search_found(admin_user, tool_world, openai_api, gpt, settings, style):
    profile = make_profile(f"openai-{style}", wire_style=style)
    if style == "server":  # OpenAI searched: the found tool is read from its tool_search_output
        first = hosted_search_reply("time", [TIME], then=[message_item("Loaded the time tool.")])
        call = function_call_item("get_current_time", {"timezone": "UTC"}, namespace="mcp__time")
        openai_api.script(first)
    else:
        openai_api.script(response_reply([tool_search_call_item({"query": f"select:{TIME}"})]),
                          response_reply([message_item("Loaded the time tool.")]))
        call = function_call_item(TIME, {"timezone": "UTC"})
    conversation, _ = converse(admin_user, "load the time tool", profile=profile, provider=gpt)
    settings.COMPACTION_THRESHOLD = 0.0001  # the next turn compacts
    openai_api.script(chat_reply("Summary: the person loaded the time tool."), response_reply([call]),
                      response_reply([message_item("It is noon UTC.")]))
    conversation, outcome = converse(admin_user, "now call it", conversation=conversation, provider=gpt)

    assert outcome.reason == "end_turn", [r.error for r in openai_api.requests]
    assert events_of(conversation, "compaction")[0].payload["carried_tools"] == [TIME]
    after = openai_api.requests[-2].body  # the first Responses request after the compaction
    assert "<conversation-summary>" in after["input"][0]["content"][0]["text"]
    if style == "native":
        assert TIME in [t.get("name") for t in after["tools"]]  # no output left in the input: sent as a function
    assert events_of(conversation, "tool_result")[-1].payload["is_error"] is False


@pytest.mark.parametrize("profile_style", ["native", "client"])
@pytest.mark.parametrize("query", ["time tokyo", "+slack message", "select:mcp__time__get_current_time,mcp__weather__get_forecast"])
def test_the_same_profile_and_query_find_the_same_tools_whoever_asks(admin_user, tool_world, openai_api, gpt, fake_api, claude,
                                                                    profile_style, query):
    """Claude (Messages API double) and an OpenAI model (Responses / Chat Completions double) ask the
    same profile's ToolSearch the same query: the same search, scores and loaded tools."""
    from playground.conversations.testing.fake_api import text_reply, tool_use_reply

    profile = make_profile(f"parity-{profile_style}", wire_style=profile_style)
    fake_api.script(tool_use_reply("ToolSearch", {"query": query}), text_reply("done"))
    by_claude, _ = converse(admin_user, "find tools", profile=profile, provider=claude)
    if profile_style == "native":
        openai_api.script(response_reply([tool_search_call_item({"query": query})]), response_reply([message_item("done")]))
    else:
        openai_api.script(chat_reply(tool_calls=[("ToolSearch", {"query": query})]), chat_reply("done"))
    by_gpt, outcome = converse(admin_user, "find tools", profile=profile, provider=gpt)
    assert outcome.reason == "end_turn", [r.error for r in openai_api.requests]

    def searched(conversation):
        payload = events_of(conversation, "toolsearch_query")[0].payload
        return {key: payload[key] for key in ("query", "backend", "reading", "scored", "loaded", "not_found", "total_deferred_tools")}

    assert searched(by_gpt) == searched(by_claude)
    assert searched(by_gpt)["loaded"]


def test_openai_usage_is_put_in_the_loops_one_accounting(admin_user, tool_world, native_profile, openai_api, gpt):
    # OpenAI's input tokens include the cached ones; the loop's `input` is the uncached part (as Anthropic reports it).
    openai_api.script(response_reply([message_item("Hi.")], input_tokens=1000, output_tokens=7, cached_tokens=600))
    conversation, _ = converse(admin_user, "hello", profile=native_profile, provider=gpt)
    response = events_of(conversation, "model_response")[0].payload
    assert response["usage"] == {"input": 400, "output": 7, "cache_read": 600, "cache_write": 0}
    assert response["usage_source"] == "reported"


def test_the_sdk_call_is_the_wire_styles_api_never_guessed_from_the_body(openai_api, gpt, fake_api, claude):
    """Providers send the body to the SDK call the loop names (`WireStyle.api`): a body whose keys
    look like another API's still goes where it was sent, and a call a provider does not make is a
    clear configuration error before anything is sent."""
    from playground.conversations.providers.base import ProviderError
    from playground.engine.wires.base import CHAT_COMPLETIONS_API, MESSAGES_API, RESPONSES_API

    openai_api.script(response_reply([message_item("hi")]))
    body = {"model": "gpt-test", "input": [{"role": "user", "content": "hi"}], "max_output_tokens": 50}
    assert gpt.create(body, api=RESPONSES_API).text() == "hi"
    assert [r.path for r in openai_api.requests] == ["/v1/responses"]
    openai_api.script(chat_reply("hello"))
    assert gpt.complete("", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], 50).text() == "hello"
    assert openai_api.requests[-1].path == "/v1/chat/completions"
    for provider, api in ((gpt, MESSAGES_API), (claude, RESPONSES_API), (claude, CHAT_COMPLETIONS_API)):
        before = len(openai_api.requests) + len(fake_api.requests)
        with pytest.raises(ProviderError, match=f"does not send {api} requests") as refused:
            provider.create({"model": "m", "messages": []}, api=api)
        assert refused.value.kind == "configuration" and len(openai_api.requests) + len(fake_api.requests) == before
