"""Payloads are shown as the JSON they are on the wire (copyable, unclipped), never as Python reprs."""
from __future__ import annotations

import json

from django.template import Context, Template
from django.urls import reverse

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation

ARGUMENTS = {"owner": "o'brien", "title": "héllo", "draft": True, "labels": None}


def test_pretty_json_filter_gives_indented_json_with_real_characters():
    out = Template("{% load payloads %}{{ v|pretty_json }}").render(Context({"v": ARGUMENTS}))
    text = out.replace("&quot;", '"').replace("&#x27;", "'")
    assert json.loads(text) == ARGUMENTS
    assert '\n  "owner": "o\'brien"' in text and "héllo" in text and "true" in text and "null" in text


def test_the_timeline_and_the_prompt_show_json_not_python_reprs(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native"))
    record_event(conversation, ev.ToolCall(tool_use_id="t1", name="mcp__github__create_issue", arguments=ARGUMENTS,
                                           permission="ask"), turn_sequence=turn.sequence)
    record_event(conversation, ev.PermissionPrompt(tool_use_id="t1", name="mcp__github__create_issue", arguments=ARGUMENTS,
                                                   reason="rule asks", timeout_seconds=60), turn_sequence=turn.sequence)
    record_event(conversation, ev.ToolResult(tool_use_id="t1", name="mcp__github__create_issue",
                                             content=[{"type": "text", "text": '{"number": 7, "url": "https://x/7"}'}]),
                 turn_sequence=turn.sequence)
    record_event(conversation, ev.ModelResponse(stop_reason="tool_use", content=[{"type": "tool_use", "id": "t1",
                                                "name": "mcp__github__create_issue", "input": ARGUMENTS}]),
                 turn_sequence=turn.sequence)
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert "{&#x27;owner&#x27;" not in body and "&#x27;draft&#x27;: True" not in body  # no Python repr anywhere
    for testid in ("prompt-arguments", "call-arguments", "response-body"):
        assert f'data-testid="{testid}">{{\n' in body or f'data-testid="{testid}">[\n' in body, testid
    assert body.count("&quot;owner&quot;: &quot;o&#x27;brien&quot;") == 3  # prompt, call, response tool_use input
    assert "&quot;number&quot;: 7,\n" in body  # a JSON text result is re-indented
    assert body.count("data-copy-button") >= 4
    assert "js/copy.js" in body


def test_each_model_request_stores_the_body_that_went_on_the_wire(admin_user, tool_world, native_profile, fake_api, claude):
    from playground.conversations.testing.fake_api import text_reply
    from tests.conversations.conftest import converse, events_of

    fake_api.script(text_reply("hello"))
    conversation, _ = converse(admin_user, "say hello", profile=native_profile, provider=claude)
    stored = events_of(conversation, "model_request")[0].payload["body"]
    sent = fake_api.message_requests[0].body
    for key in ("model", "max_tokens", "system", "tools", "messages"):
        assert stored.get(key) == sent.get(key), key
    assert "api_key" not in json.dumps(stored) and "sk-test" not in json.dumps(stored)


def test_a_body_leaves_out_headers_and_credentials_and_a_huge_one_is_a_note():
    body = ev.request_body({"model": "m", "messages": [], "extra_headers": {"x-api-key": "sk-1"}, "api_key": "sk-2",
                            "mcp_servers": [{"type": "url", "url": "https://mcp", "authorization_token": "sk-3"}],
                            "max_tokens": 10})
    assert "extra_headers" not in body and "api_key" not in body and "sk-" not in json.dumps(body)
    assert body["mcp_servers"][0]["url"] == "https://mcp" and body["max_tokens"] == 10
    schema = {"type": "object", "properties": {"api_key": {"type": "string"}, "token": {"type": "string"}}}
    assert ev.request_body({"tools": [{"name": "t", "input_schema": schema}]})["tools"][0]["input_schema"] == schema
    huge = ev.request_body({"model": "m", "messages": [{"role": "user", "content": "x" * (300 * 1024)}]})
    assert huge["too_large"] is True and huge["size_bytes"] > 300 * 1024 and "not stored" in huge["note"]
    assert "messages" not in huge


def test_the_request_and_response_bodies_are_one_click_away(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native"))
    record_event(conversation, ev.ModelRequest(provider="anthropic", model="m", message_count=1, tool_count=0,
                                               body={"model": "m", "system": "Be brief — thanks", "messages": []}),
                 turn_sequence=turn.sequence)
    record_event(conversation, ev.ModelRequest(provider="anthropic", model="m", message_count=1, tool_count=0,
                                               body=ev.request_body({"messages": ["x" * (300 * 1024)]})),
                 turn_sequence=turn.sequence)
    record_event(conversation, ev.ModelResponse(stop_reason="end_turn", usage={"input": 5, "output": 2},
                                                content=[{"type": "text", "text": "hi"}]), turn_sequence=turn.sequence)
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    request_block = body.split('data-testid="model-request"')[1]
    assert request_block.startswith("><summary") and "<details" not in request_block.split("</summary>")[0]
    assert 'data-testid="request-body">{\n  &quot;model&quot;: &quot;m&quot;,\n  &quot;system&quot;: &quot;Be brief — thanks&quot;' in body
    assert 'data-testid="request-body-note">The request body was' in body
    assert 'data-testid="response-body">{\n  &quot;stop_reason&quot;: &quot;end_turn&quot;' in body


def test_a_body_that_would_push_the_event_over_the_limit_is_a_note_not_a_shortened_body(db, admin_user):
    conversation = Conversation.objects.create(owner=admin_user)
    body = ev.request_body({"model": "m", "messages": [{"role": "user", "content": "x" * (200 * 1024)}]})
    assert body["messages"]  # alone it fits
    event = ev.ModelRequest(provider="demo", model="m", message_count=1, tool_count=0,
                            request={"tools": [{"name": "t" * 40}] * 2000}, body=body)
    stored = record_event(conversation, event).payload
    assert stored["body"]["too_large"] is True and stored["body"]["size_bytes"] > 200 * 1024
    assert "truncated" not in stored  # the rest of the event is whole


def test_counts_on_the_timeline_say_one_message_not_one_messages(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native"))
    for count in (1, 3):
        record_event(conversation, ev.ModelRequest(provider="demo", model="m", message_count=count, tool_count=1),
                     turn_sequence=turn.sequence)
        record_event(conversation, ev.Compaction(summary="s", compacted_messages=count), turn_sequence=turn.sequence)
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert "demo request: 1 message," in body and "demo request: 3 messages," in body
    assert "1 message folded" in body and "3 messages folded" in body
    assert "1 messages" not in body
