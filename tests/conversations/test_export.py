"""/conversations/<id>/export.json: the conversation and its stored events as a download, for those who may see the page."""
from __future__ import annotations

import json

from django.test import Client
from django.urls import reverse

from playground.conversations import services
from playground.conversations.models import Event
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.testing.fake_api import text_reply
from tests.conversations.conftest import converse

SECRET = "sk-ant-export-secret-0123456789"


def export(client, conversation):
    return client.get(reverse("conversations:export", args=[conversation.pk]))


def test_the_export_holds_the_conversation_and_every_stored_event(admin_user, admin_client, tool_world, native_profile):
    from playground.conversations.providers.demo import DemoAgentProvider

    conversation, _ = converse(admin_user, "What time is it in Tokyo?", profile=native_profile, provider=DemoAgentProvider())
    response = export(admin_client, conversation)
    assert response.status_code == 200 and response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="conversation-{conversation.pk}.json"'
    data = json.loads(response.content)
    assert set(data) == {"conversation", "events"}
    head = data["conversation"]
    assert head["id"] == conversation.pk and head["title"] == conversation.title and head["owner"] == "alice"
    assert head["profile"]["name"] == "native" and head["provider"] == "demo" and head["status"] == "idle"
    assert head["replay_of"] is None  # not a replay (replays.py)
    assert head["created_at"].startswith(conversation.created_at.strftime("%Y-%m-%dT%H:%M"))
    stored = list(Event.objects.filter(conversation=conversation).order_by("sequence"))
    assert [e["sequence"] for e in data["events"]] == [e.sequence for e in stored]
    for exported, event in zip(data["events"], stored):
        assert set(exported) == {"sequence", "type", "payload", "parent_sequence", "turn_sequence", "created_at"}
        assert (exported["type"], exported["payload"], exported["parent_sequence"], exported["turn_sequence"]) == (
            event.type, event.payload, event.parent_sequence, event.turn_sequence)
    assert {"message", "turn_started", "toolsearch_query", "tool_call", "tool_result"} <= {e["type"] for e in data["events"]}


def test_the_detail_page_links_the_export(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    body = viewer_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert f'href="{reverse("conversations:export", args=[conversation.pk])}" download' in body


def test_the_export_follows_the_detail_pages_access_rule(admin_client, admin_user, viewer_user):
    bobs = services.start_conversation(viewer_user, title="bob's")
    alices = services.start_conversation(admin_user, title="alice's")
    bob = Client()
    bob.force_login(viewer_user)
    assert export(bob, bobs).status_code == 200  # the owner
    assert export(bob, alices).status_code == 200  # someone else's: watched read-only, as the detail page
    assert bob.get(reverse("conversations:detail", args=[alices.pk])).status_code == 200
    assert export(admin_client, bobs).status_code == 200  # staff see everyone's
    anonymous = Client()
    response = export(anonymous, bobs)
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert bob.get(reverse("conversations:export", args=[999999])).status_code == 404


def test_no_api_key_appears_in_the_export(admin_user, admin_client, tool_world, native_profile, fake_api, settings):
    settings.ANTHROPIC_API_KEY = SECRET
    claude = AnthropicProvider(api_key=settings.ANTHROPIC_API_KEY, base_url=fake_api.url, max_retries=2, timeout=5)
    fake_api.script(text_reply("hello"))
    conversation, _ = converse(admin_user, "say hello", profile=native_profile, provider=claude)
    assert SECRET in json.dumps(fake_api.message_requests[0].headers)  # the key did go on the wire …
    response = export(admin_client, conversation)
    data = json.loads(response.content)
    assert "model_request" in {e["type"] for e in data["events"]}  # … and the request bodies are in the export,
    assert SECRET not in response.content.decode()  # without it
    assert SECRET not in admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()


def test_the_calculators_refusal_reads_in_clean_utf_8_in_the_export(admin_user, admin_client, tool_world):
    """The refusal says "within ±1.8e308"; a JSON file without its charset opened in a browser read "Â±"."""
    from playground.conversations.events import ToolCall, ToolResult, record_event
    from playground.engine.tools import Tool
    from playground.mcp_servers.executor import PlaygroundExecutor

    refusal = PlaygroundExecutor().execute(Tool(name="calculator"), {"expression": "1e308*10"})
    text = refusal.content[0]["text"]
    assert refusal.is_error and "±1.8e308" in text and "Â" not in text
    conversation = services.start_conversation(admin_user)
    record_event(conversation, ToolCall(tool_use_id="c", name="calculator", arguments={"expression": "1e308*10"}))
    record_event(conversation, ToolResult(tool_use_id="c", name="calculator", is_error=True, error=text))
    response = admin_client.get(reverse("conversations:export", args=[conversation.pk]))
    assert response["Content-Type"] == "application/json; charset=utf-8"
    body = response.content.decode(response.charset)
    assert "±1.8e308" in body and "Â" not in body
