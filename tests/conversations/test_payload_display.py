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
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire_style="native"))
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
    for testid in ("prompt-arguments", "call-arguments", "response-content"):
        assert f'data-testid="{testid}">{{\n' in body or f'data-testid="{testid}">[\n' in body, testid
    assert body.count("&quot;owner&quot;: &quot;o&#x27;brien&quot;") == 3  # prompt, call, response tool_use input
    assert "&quot;number&quot;: 7,\n" in body  # a JSON text result is re-indented
    assert body.count("data-copy-button") >= 4
    assert "js/copy.js" in body
