"""A profile's provider field decides the model provider when the conversation names none."""
from __future__ import annotations

import pytest

from playground.conversations import services
from playground.conversations.selectors import provider_label
from playground.conversations.testing.fake_api import text_reply
from tests.conversations.conftest import converse, events_of, make_profile

pytestmark = pytest.mark.django_db


def test_a_demo_profile_uses_the_demo_agent_even_with_an_api_key(settings, admin_user, tool_world, fake_api):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_api.url
    fake_api.script(text_reply("from the API"))  # would answer if the key rule won
    profile = make_profile("demo-forced", provider="demo")

    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile)

    assert conversation.profile_snapshot["provider"] == "demo"
    assert {e.payload["provider"] for e in events_of(conversation, "model_request")} == {"demo"}
    assert fake_api.message_requests == []
    assert "demo" in provider_label(conversation).lower()


def test_an_automatic_profile_follows_the_api_key(settings, admin_user, tool_world, fake_api):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_api.url
    fake_api.script(text_reply("from the API"))
    profile = make_profile("automatic")  # provider "" = automatic

    conversation, _ = converse(admin_user, "Hello", profile=profile)

    assert "provider" not in conversation.profile_snapshot
    assert {e.payload["provider"] for e in events_of(conversation, "model_request")} == {"anthropic"}
    assert len(fake_api.message_requests) == 1


def test_the_conversation_choice_beats_the_profile(settings, admin_user, tool_world):
    settings.ANTHROPIC_API_KEY = ""
    profile = make_profile("anthropic-forced", provider="anthropic")
    conversation = services.start_conversation(admin_user, profile=profile, provider="demo")

    conversation, _ = converse(admin_user, "What time is it in Tokyo?", conversation=conversation)

    assert {e.payload["provider"] for e in events_of(conversation, "model_request")} == {"demo"}
