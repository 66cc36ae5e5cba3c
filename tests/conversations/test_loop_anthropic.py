"""The loop with the real anthropic SDK against the local Messages API server (which rejects what the API rejects)."""
from __future__ import annotations

import json
import time

import pytest

from playground.conversations.models import Conversation
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.testing.fake_api import ErrorReply, FakeMessagesAPI, text_reply, tool_use_reply
from playground.engine.prompt_cache import account, breakpoints_of
from tests.conversations.conftest import converse, event_types, events_of, make_profile

TIME = "mcp__time__get_current_time"


def tool_names(request) -> list[str]:
    return [t.get("name") for t in request.body.get("tools", [])]


def tool_def(request, name: str) -> dict:
    return next(t for t in request.body["tools"] if t.get("name") == name)


def last_user_blocks(request) -> list[dict]:
    return request.body["messages"][-1]["content"]


def test_native_style_discovers_loads_and_calls_a_deferred_tool(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(
        tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}),
        tool_use_reply(TIME, {"timezone": "Asia/Tokyo"}),
        text_reply("It is noon in Tokyo."),
    )
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=native_profile, provider=claude)

    assert outcome.reason == "end_turn"
    first, second, third = fake_api.message_requests
    assert all(r.status == 200 for r in fake_api.message_requests)
    assert TIME not in tool_names(first)  # undiscovered deferred tools are never sent
    assert "ToolSearch" in tool_names(first) and "echo" in tool_names(first)
    assert TIME in first.body["system"]  # announced by name only
    assert tool_def(second, TIME)["defer_loading"] is True
    blocks = last_user_blocks(second)
    assert blocks[0]["content"] == [{"type": "tool_reference", "tool_name": TIME}]
    assert blocks[1] == {"type": "text", "text": "Tool loaded."}
    assert third.body["messages"][-1]["content"][0]["type"] == "tool_result"

    search = events_of(conversation, "toolsearch_query")[0]
    assert search.payload["loaded"] == [TIME]
    turns = events_of(conversation, "turn_started")
    assert [t.payload["discovered_tools"] for t in turns] == [[], [TIME], [TIME]]
    assert turns[0].payload["decision"]["enabled"] is True
    # The turn lists exactly what its request carried, the discovered tool included.
    assert [t.payload["loaded_tools"] for t in turns] == [tool_names(r) for r in (first, second, third)]
    # Loading the discovered tool's schema costs tokens in the next request (small world: ToolSearch
    # itself outweighs the few deferred tools, so no saving is asserted here).
    assert turns[1].payload["tokens"]["sent_tokens"] > turns[0].payload["tokens"]["sent_tokens"] > 0
    result = events_of(conversation, "tool_result")[0]
    assert result.payload["name"] == TIME and not result.payload["is_error"]
    response = events_of(conversation, "model_response")[0]
    assert response.payload["usage"] == {"input": 100, "output": 20, "cache_read": 0, "cache_write": 0}
    assert events_of(conversation, "message")[-1].payload == {"role": "assistant", "text": "It is noon in Tokyo.", "author": "", "streamed": True}
    assert conversation.status == Conversation.Status.IDLE


def test_discovered_tools_stay_loaded_in_the_next_message(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(
        tool_use_reply("ToolSearch", {"query": "current time timezone"}),
        text_reply("Found it."),
        text_reply("Still here."),
    )
    conversation, _ = converse(admin_user, "Find a time tool", profile=native_profile, provider=claude)
    assert events_of(conversation, "toolsearch_query")[0].payload["loaded"][0] == TIME
    converse(admin_user, "thanks", conversation=conversation, provider=claude)

    later = fake_api.message_requests[-1]
    assert later.status == 200
    assert tool_def(later, TIME)["defer_loading"] is True  # recovered from the history, not from a global


def test_client_style_works_through_a_gateway_without_defer_loading(admin_user, tool_world, client_profile, claude):
    with FakeMessagesAPI(supports_defer_loading=False) as gateway:
        provider = AnthropicProvider(api_key="sk-test", base_url=gateway.url, max_retries=0, timeout=5)
        gateway.script(
            tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}),
            tool_use_reply(TIME, {"timezone": "Europe/Paris"}),
            text_reply("Done."),
        )
        conversation, outcome = converse(admin_user, "time in Paris", profile=client_profile, provider=provider)
        assert outcome.reason == "end_turn", [r.error for r in gateway.requests]
        second = gateway.message_requests[1]
        assert "defer_loading" not in tool_def(second, TIME)
        result = last_user_blocks(second)[0]
        assert json.loads(result["content"][0]["text"])["matches"] == [TIME]
    assert events_of(conversation, "tool_result")[0].payload["name"] == TIME


def test_native_style_through_such_a_gateway_is_a_400_error_event(admin_user, tool_world, native_profile):
    with FakeMessagesAPI(supports_defer_loading=False) as gateway:
        provider = AnthropicProvider(api_key="sk-test", base_url=gateway.url, max_retries=0, timeout=5)
        gateway.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), text_reply("never"))
        conversation, outcome = converse(admin_user, "time", profile=native_profile, provider=provider)
    assert outcome.reason == "error"
    error = events_of(conversation, "error")[0].payload
    assert error["status_code"] == 400 and "Extra inputs are not permitted" in error["message"]
    assert conversation.status == Conversation.Status.FAILED


def test_tool_search_off_sends_every_tool_in_full(admin_user, tool_world, off_profile, fake_api, claude):
    fake_api.script(tool_use_reply(TIME, {"timezone": "UTC"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "time?", profile=off_profile, provider=claude)
    assert outcome.reason == "end_turn"
    first = fake_api.message_requests[0]
    assert "ToolSearch" not in tool_names(first)
    assert TIME in tool_names(first) and not any(t.get("defer_loading") for t in first.body["tools"])
    turn = events_of(conversation, "turn_started")[0].payload
    assert turn["decision"]["enabled"] is False and turn["deferred_tools"] == []
    assert turn["tokens"]["sent_tokens"] == turn["tokens"]["baseline_tokens"]


def test_calling_a_deferred_tool_before_loading_it_gets_told_to_select_it(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(tool_use_reply(TIME, {"timezone": "UTC"}), text_reply("I will search first."))
    conversation, _ = converse(admin_user, "time?", profile=native_profile, provider=claude)
    result = last_user_blocks(fake_api.message_requests[1])[0]
    assert result["is_error"] is True and f"select:{TIME}" in result["content"][0]["text"]
    assert events_of(conversation, "tool_result")[0].payload["is_error"] is True


def test_a_regression_in_request_building_shows_up_as_a_400(admin_user, tool_world, native_profile, fake_api, claude, monkeypatch):
    from playground.registry import adapter

    real_plan = adapter.plan_turn

    def forgets_discovered_tools(*args, **kwargs):
        turn = real_plan(*args, **kwargs)
        plan = turn.request
        plan.tools = [t for t in plan.tools if t["name"] not in plan.discovered_tools]
        return turn

    monkeypatch.setattr(adapter, "plan_turn", forgets_discovered_tools)
    fake_api.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), text_reply("never reached"))
    conversation, outcome = converse(admin_user, "time?", profile=native_profile, provider=claude)
    assert outcome.reason == "error"
    assert fake_api.message_requests[-1].status == 400
    assert f"Tool reference '{TIME}' not found in available tools" in events_of(conversation, "error")[0].payload["message"]


def test_rate_limits_are_retried_by_the_sdk_then_shown_as_an_error(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(*[ErrorReply(429, "Number of request tokens has exceeded your rate limit")] * 3)
    conversation, outcome = converse(admin_user, "hi", profile=native_profile, provider=claude)
    assert outcome.reason == "error"
    assert len(fake_api.message_requests) == 3  # the first try and max_retries=2
    error = events_of(conversation, "error")[0].payload
    assert error["kind"] == "rate_limit" and error["status_code"] == 429 and error["retryable"] is True
    assert event_types(conversation)[-1] == "status" and conversation.status == Conversation.Status.FAILED


def test_overloaded_and_server_errors_recover_when_a_retry_succeeds(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(ErrorReply(529, "Overloaded"), ErrorReply(500, "Internal error"), text_reply("Hello!"))
    conversation, outcome = converse(admin_user, "hi", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn"
    assert [r.status for r in fake_api.message_requests] == [529, 500, 200]
    assert not events_of(conversation, "error")


def test_a_model_api_timeout_ends_as_an_error_not_a_hung_conversation(admin_user, tool_world, native_profile, fake_api):
    def slow(body):
        time.sleep(1.5)
        return text_reply("too late")

    fake_api.script(slow)
    provider = AnthropicProvider(api_key="sk-test", base_url=fake_api.url, max_retries=0, timeout=0.5)
    conversation, outcome = converse(admin_user, "hi", profile=native_profile, provider=provider)
    assert outcome.reason == "error"
    assert events_of(conversation, "error")[0].payload["kind"] == "timeout"
    assert conversation.status == Conversation.Status.FAILED


def test_max_turns_stops_a_model_that_never_ends(admin_user, tool_world, native_profile, fake_api, claude, settings):
    settings.AGENT_MAX_TURNS = 2
    fake_api.script(tool_use_reply("echo", {"text": "a"}), tool_use_reply("echo", {"text": "b"}), text_reply("unused"))
    conversation, outcome = converse(admin_user, "loop", profile=native_profile, provider=claude)
    assert outcome.reason == "max_turns"
    assert len(fake_api.message_requests) == 2
    assert events_of(conversation, "error")[0].payload["kind"] == "max_turns"
    assert conversation.status == Conversation.Status.IDLE


def test_a_reply_cut_off_mid_call_or_empty_leaves_a_history_the_api_accepts(admin_user, tool_world, native_profile, fake_api, claude):
    from playground.conversations.testing.fake_api import message_reply

    cut = tool_use_reply("echo", {"text": "partial"})
    cut["stop_reason"] = "max_tokens"
    fake_api.script(cut, message_reply([], stop_reason="end_turn"), text_reply("fine"))
    conversation, outcome = converse(admin_user, "first", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn" and not events_of(conversation, "tool_call")
    converse(admin_user, "second", conversation=conversation, provider=claude)
    converse(admin_user, "third", conversation=conversation, provider=claude)
    assert [r.status for r in fake_api.message_requests] == [200, 200, 200]
    history = fake_api.message_requests[-1].body["messages"]
    assert history[2]["content"][0]["content"][0]["text"] == "Not run: the response ended with max_tokens."


@pytest.mark.parametrize("wire_style", ["native", "client", "server"])
def test_agent_max_tokens_reaches_the_api_in_every_wire_style(settings, admin_user, tool_world, fake_api, claude,
                                                              wire_style):
    settings.AGENT_MAX_TOKENS = 1234
    fake_api.script(text_reply("Hello."))
    profile = make_profile(f"max-tokens-{wire_style}", wire_style=wire_style)
    conversation, outcome = converse(admin_user, "hi", profile=profile, provider=claude)

    assert outcome.reason == "end_turn", [r.error for r in fake_api.requests]
    (request,) = fake_api.message_requests
    assert request.body["max_tokens"] == 1234
    assert events_of(conversation, "model_request")[0].payload["request"]["max_tokens"] == 1234


def test_with_prompt_caching_every_request_carries_breakpoints_and_the_reported_split_is_the_models(
        admin_user, tool_world, settings):
    """PROMPT_CACHE on: the loop's requests through the real SDK carry the three breakpoints, and the
    usage the double reports (the engine's cache model) is what the conversation records, turn by turn."""
    settings.PROMPT_CACHE, settings.PROMPT_CACHE_TTL = True, "5m"
    profile = make_profile("cached", system_prompt="You are a careful assistant. " * 120)  # above 1,024 tokens
    with FakeMessagesAPI(prompt_cache=True, clock=lambda: 0.0) as server:
        server.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), tool_use_reply(TIME, {"timezone": "UTC"}),
                      text_reply("Noon."))
        provider = AnthropicProvider(api_key="sk-test", base_url=server.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "What time is it?", profile=profile, provider=provider)
        requests = server.message_requests
    assert outcome.reason == "end_turn" and [r.status for r in requests] == [200, 200, 200]
    for request in requests:
        points = breakpoints_of(request.body)
        assert points[0] == "tools: ToolSearch" and points[1] == "system" and points[2].startswith("messages[")
    summaries = [e.payload["request"]["cache_breakpoints"] for e in events_of(conversation, "model_request")]
    assert summaries == [breakpoints_of(r.body) for r in requests]  # the request view lists them
    expected = account([(0.0, r.body) for r in requests])
    reported = [e.payload["usage"] for e in events_of(conversation, "model_response")]
    assert [(u["input"], u["cache_write"], u["cache_read"]) for u in reported] == [
        (t.uncached_tokens, t.cache_write_tokens, t.cache_read_tokens) for t in expected]
    assert expected[1].cache_read_tokens > 1024 and expected[1].prefix_break is None  # the discovery kept the prefix
