"""Choices that cannot work here are shown disabled with the reason and the fix, and refused before a run starts:
Claude without ANTHROPIC_API_KEY, the server wire style on the demo agent, the postgres backend without PostgreSQL."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from playground.conversations.models import Conversation
from playground.registry.models import AgentProfile

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_key_no_postgres(settings, monkeypatch):
    settings.ANTHROPIC_API_KEY = ""
    monkeypatch.delenv("TOOLSEARCH_PG_DSN", raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:///x.sqlite3")


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    from playground.conversations import tasks

    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": None)


def option(body: str, value: str) -> str:
    match = re.search(rf'<option value="{value}"[^>]*>[^<]*</option>', body)
    assert match, value
    return match.group(0)


def test_the_new_conversation_form_disables_claude_without_a_key(admin_client):
    body = admin_client.get(reverse("conversations:new")).content.decode()
    claude = option(body, "anthropic")
    assert " disabled" in claude and "set ANTHROPIC_API_KEY" in claude
    assert " disabled" not in option(body, "demo")
    response = admin_client.post(reverse("conversations:new"), {"provider": "anthropic", "message": "hi"})
    assert response.status_code == 200 and "Claude (Anthropic API) cannot run here" in response.content.decode()
    assert "set ANTHROPIC_API_KEY" in response.content.decode() and not Conversation.objects.exists()


def test_a_profile_that_cannot_run_is_refused_before_the_run(admin_client):
    server = AgentProfile.objects.create(name="server-side", wire_style="server")
    claude = AgentProfile.objects.create(name="claude", provider="anthropic")
    postgres = AgentProfile.objects.create(name="pg", search_backend="postgres")
    for profile, message in ((server, "the server wire style needs the Claude (Anthropic API) or OpenAI"),
                             (claude, "Claude (Anthropic API) cannot run here (no API key: set ANTHROPIC_API_KEY)"),
                             (postgres, "the search backend &#x27;postgres&#x27; needs PostgreSQL")):
        response = admin_client.post(reverse("conversations:new"), {"profile": profile.pk, "message": "hi"})
        assert message in response.content.decode(), profile.name
    response = admin_client.post(reverse("conversations:compare"), {"profile_a": server.pk, "message": "hi"})
    assert "the server wire style needs" in response.content.decode()
    assert not Conversation.objects.exists()
    # The demo agent still runs a plain profile.
    plain = AgentProfile.objects.create(name="plain")
    assert admin_client.post(reverse("conversations:new"), {"profile": plain.pk, "message": "hi"}).status_code == 302


def test_the_profile_form_says_why_a_choice_cannot_run_here(admin_client):
    body = admin_client.get(reverse("registry:profile_create")).content.decode()
    assert "set ANTHROPIC_API_KEY" in option(body, "anthropic")
    assert "needs the Claude (Anthropic API) provider" in option(body, "server")
    assert "needs PostgreSQL" in option(body, "postgres")


def test_the_inspector_disables_postgres_without_postgresql(viewer_client):
    body = viewer_client.get(reverse("registry:inspector")).content.decode()
    assert " disabled" in option(body, "postgres") and "needs PostgreSQL" in option(body, "postgres")
    assert " disabled" not in option(body, "bm25")

