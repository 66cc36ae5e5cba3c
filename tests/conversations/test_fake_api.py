"""The fake Messages API rejects what the real API rejects, with the real error shape, through the real SDK."""
from __future__ import annotations

import base64

import anthropic
import pytest

from playground.conversations.testing.fake_api import ErrorReply, FakeMessagesAPI, server_search_reply, text_reply
from playground.engine.prompt_cache import account, with_cache_breakpoints

SEARCH = {"name": "ToolSearch", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
TIME = {"name": "mcp__time__get_current_time", "input_schema": {"type": "object", "properties": {}}}


def client(server: FakeMessagesAPI, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="sk-test", base_url=server.url, max_retries=retries, timeout=5)


def ask(server, *, tools, messages, retries=0):
    return client(server, retries).messages.create(model="claude-test", max_tokens=100, tools=tools, messages=messages)


def search_exchange(reference_content):
    return [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "time"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": reference_content}]},
    ]


def rejected(server, **kwargs) -> str:
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(server, **kwargs)
    body = info.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"]


def test_it_answers_a_valid_request_and_records_it():
    with FakeMessagesAPI() as server:
        server.script(text_reply("hello"))
        message = ask(server, tools=[SEARCH, {**TIME, "defer_loading": True}], messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].text == "hello" and message.usage.input_tokens == 100
        assert server.message_requests[0].body["tools"][1]["defer_loading"] is True
        assert "anthropic-version" in server.message_requests[0].headers


def test_it_rejects_a_request_where_every_tool_is_deferred():
    with FakeMessagesAPI() as server:
        message = rejected(server, tools=[{**SEARCH, "defer_loading": True}], messages=[{"role": "user", "content": "hi"}])
    assert message == "At least one tool must have defer_loading=false. All tools cannot be deferred."


def test_it_rejects_a_reference_to_a_tool_not_in_tools():
    with FakeMessagesAPI() as server:
        message = rejected(server, tools=[SEARCH], messages=search_exchange([{"type": "tool_reference", "tool_name": "mcp__x__y"}]))
    assert message == "Tool reference 'mcp__x__y' not found in available tools"


def test_it_rejects_references_mixed_with_text_in_one_tool_result():
    content = [{"type": "tool_reference", "tool_name": TIME["name"]}, {"type": "text", "text": "Tool loaded."}]
    with FakeMessagesAPI() as server:
        message = rejected(server, tools=[SEARCH, {**TIME, "defer_loading": True}], messages=search_exchange(content))
    assert "cannot be mixed" in message


def test_a_gateway_rejects_defer_loading_and_tool_references():
    with FakeMessagesAPI(supports_defer_loading=False) as server:
        message = rejected(server, tools=[SEARCH, {**TIME, "defer_loading": True}], messages=[{"role": "user", "content": "hi"}])
        assert message == "tools.1.custom.defer_loading: Extra inputs are not permitted"
        message = rejected(server, tools=[SEARCH, TIME], messages=search_exchange([{"type": "tool_reference", "tool_name": TIME["name"]}]))
        assert "tool_reference" in message


def test_it_rejects_a_tool_use_without_its_result():
    messages = search_exchange("ok")[:2] + [{"role": "user", "content": "next"}]
    with FakeMessagesAPI() as server:
        message = rejected(server, tools=[SEARCH], messages=messages)
    assert "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1" in message


def test_server_side_search_blocks_round_trip_and_srvtoolu_results_are_rejected():
    bm25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    with FakeMessagesAPI() as server:
        server.script(server_search_reply("time", [TIME["name"]], then=[{"type": "text", "text": "found"}]), text_reply("ok"))
        first = ask(server, tools=[bm25, {**TIME, "defer_loading": True}], messages=[{"role": "user", "content": "time?"}])
        assistant = [b.model_dump(mode="json", exclude_none=True) for b in first.content]
        assert assistant[1]["content"]["tool_references"][0]["tool_name"] == TIME["name"]
        history = [{"role": "user", "content": "time?"}, {"role": "assistant", "content": assistant}, {"role": "user", "content": "thanks"}]
        assert ask(server, tools=[bm25, {**TIME, "defer_loading": True}], messages=history).content[0].text == "ok"
        bad = [*history[:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": assistant[0]["id"], "content": "x"}]}]
        assert "server tool use" in rejected(server, tools=[bm25, {**TIME, "defer_loading": True}], messages=bad)


def test_scripted_http_errors_are_retried_by_the_sdk():
    with FakeMessagesAPI() as server:
        server.script(ErrorReply(429), ErrorReply(529), text_reply("finally"))
        assert ask(server, tools=[SEARCH], messages=[{"role": "user", "content": "hi"}], retries=2).content[0].text == "finally"
        assert [r.status for r in server.message_requests] == [429, 529, 200]


def test_an_unscripted_request_fails_loudly():
    with FakeMessagesAPI() as server, pytest.raises(anthropic.APIStatusError) as info:
        ask(server, tools=[SEARCH], messages=[{"role": "user", "content": "hi"}], retries=2)
    assert info.value.status_code == 418 and len(server.message_requests) == 1


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def image_result(source):
    return [
        {"role": "user", "content": "badge?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__time__get_current_time", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": "here"}, {"type": "image", "source": source}]}]},
    ]


def test_an_image_in_a_tool_result_is_accepted():
    with FakeMessagesAPI() as server:
        server.script(text_reply("a red badge"))
        answer = ask(server, tools=[TIME], messages=image_result({"type": "base64", "media_type": "image/png", "data": PIXEL}))
        assert answer.content[0].text == "a red badge"


@pytest.mark.parametrize("source, message", [
    ({"type": "base64", "media_type": "image/bmp", "data": PIXEL},
     "tool_result.content.1.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"),
    ({"type": "base64", "media_type": "image/png", "data": "%%%"}, "image.source.base64: invalid base64 data"),
    ({"type": "base64", "media_type": "image/png", "data": base64.b64encode(b"\0" * (5 * 1024 * 1024 + 1)).decode()},
     "image exceeds 5 MB maximum: 5242881 bytes > 5242880 bytes"),
])
def test_an_image_the_real_api_would_refuse_is_refused(source, message):
    with FakeMessagesAPI() as server:
        assert message in rejected(server, tools=[TIME], messages=image_result(source))


def test_with_prompt_caching_it_reports_the_cache_models_split_through_the_sdk():
    """The double's usage is the engine's cache model, to the token, on a conversation with breakpoints."""
    now = [0.0]
    tools = [{**SEARCH, "description": "Find tools. " * 300}, {**TIME, "defer_loading": True}]
    first = with_cache_breakpoints({"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools, "system": "Be brief.",
                                    "messages": [{"role": "user", "content": "time?"}]})
    second = with_cache_breakpoints({**first, "messages": search_exchange([{"type": "tool_reference", "tool_name": TIME["name"]}])})
    expected = account([(0.0, first), (30.0, second)])
    with FakeMessagesAPI(prompt_cache=True, clock=lambda: now[0]) as server:
        server.script(text_reply("a", input_tokens=1), text_reply("b", input_tokens=1))
        usages = []
        for at, body in ((0.0, first), (30.0, second)):
            now[0] = at
            usages.append(client(server).messages.create(**body).usage)
    assert [(u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens) for u in usages] == [
        (t.uncached_tokens, t.cache_write_tokens, t.cache_read_tokens) for t in expected]
    assert expected[0].cache_write_tokens > 1024 and expected[1].cache_read_tokens == expected[0].cache_write_tokens


def test_it_rejects_more_than_four_cache_breakpoints():
    marker = {"type": "ephemeral"}
    with FakeMessagesAPI() as server:
        message = rejected(server, tools=[{**SEARCH, "cache_control": marker}], messages=[
            {"role": "user", "content": [{"type": "text", "text": str(i), "cache_control": marker} for i in range(4)]}])
    assert message == "A maximum of 4 blocks with cache_control may be provided. Found 5."
