"""An upstream that echoes the API key in its error text (401, 429, 500, a streamed error) through the
real SDKs: the key is in no stored error event, page, export, share page, presentation or socket frame.
And a 200 whose body is not JSON says so (providers/base.py `parsed_reply`)."""
from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from playground.conversations import sharing
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.providers.openai_api import OpenAIProvider
from playground.conversations.testing.fake_api import ErrorReply, FakeMessagesAPI, StreamedError
from playground.conversations.testing.fake_openai import ErrorReply as OpenAIErrorReply
from playground.conversations.testing.fake_openai import FakeOpenAIAPI
from playground.conversations.testing.local_double import RawBody
from playground.mcp_servers.secrets import SECRET_MASK, process_secrets, scrub
from tests.conversations.conftest import converse, events_of
from tests.conversations.test_share_links import connect_shared

ANTHROPIC_KEY = "sk-ant-api03-Zq7Lw2Rx9Kd4Np6Tb8Vc1Hm3Gf5Js0Ye-AbCdEf12"
OPENAI_KEY = "sk-proj-Tn4Kp8Wq2Zr6Xm1Lb9Vd3Hc7Gf5Js0Ye-QrStUv34"


def echoes(key: str) -> str:
    """What some proxies and gateways answer: the whole key, and the shortened form OpenAI uses."""
    return f"Incorrect API key provided: {key}. Seen before as {key[:12]}****{key[-4:]} (Bearer {key})."


def leaks(text: str, key: str) -> list[str]:
    return [form for form in (key, key[:12], f"****{key[-4:]}", key[-12:]) if form in text]


def assert_no_key_anywhere(conversation, key: str, owner_client) -> None:
    [error] = events_of(conversation, "error")
    assert SECRET_MASK in error.payload["message"] and not leaks(error.payload["message"], key), error.payload
    assert not leaks(json.dumps(list(conversation.events.values_list("payload", flat=True))), key)
    detail = owner_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    exported = owner_client.get(reverse("conversations:export", args=[conversation.pk])).content.decode()
    token = sharing.token_for(sharing.create_link(conversation, user=conversation.owner, hours=1))
    shared = Client().get(reverse("conversations:shared", args=[token])).content.decode()
    presented = Client().get(reverse("conversations:shared_present", args=[token])).content.decode()
    for where, text in (("page", detail), ("export.json", exported), ("share page", shared), ("presentation", presented)):
        assert not leaks(text, key), f"the {where} shows the key"
    assert "Incorrect API key provided" in shared  # the error itself is still told


@pytest.fixture
def anthropic_key(settings):
    settings.ANTHROPIC_API_KEY = ANTHROPIC_KEY
    return ANTHROPIC_KEY


@pytest.fixture
def openai_key(settings):
    settings.OPENAI_API_KEY = OPENAI_KEY
    return OPENAI_KEY


def test_the_process_knows_its_configured_keys_and_scrubs_their_shortened_echoes(anthropic_key, openai_key, settings):
    assert {ANTHROPIC_KEY, OPENAI_KEY} <= set(process_secrets())
    assert settings.SECRET_KEY in process_secrets()
    for text in (echoes(ANTHROPIC_KEY), f"key {OPENAI_KEY[:10]}… rejected", f"key ...{OPENAI_KEY[-4:]} rejected"):
        assert not leaks(scrub(text), ANTHROPIC_KEY) and not leaks(scrub(text), OPENAI_KEY), scrub(text)
    # Plain settings named like tokens stay readable, and so does prose about keys.
    assert scrub("4096 tokens; API key is missing; Loading...") == "4096 tokens; API key is missing; Loading..."


@pytest.mark.parametrize("reply", [ErrorReply(401, echoes(ANTHROPIC_KEY)), ErrorReply(429, echoes(ANTHROPIC_KEY)),
                                   ErrorReply(500, echoes(ANTHROPIC_KEY)), StreamedError(echoes(ANTHROPIC_KEY))],
                         ids=["401", "429", "500", "streamed"])
def test_claude_errors_echoing_the_key_are_stored_scrubbed(reply, anthropic_key, admin_user, admin_client, tool_world, native_profile):
    with FakeMessagesAPI() as api:
        api.script(reply)
        provider = AnthropicProvider(api_key=ANTHROPIC_KEY, base_url=api.url, max_retries=0, timeout=10)
        conversation, outcome = converse(admin_user, "What is the weather in Paris?", profile=native_profile, provider=provider)
    assert outcome.reason == "error" and not leaks(str(outcome), ANTHROPIC_KEY)
    assert_no_key_anywhere(conversation, ANTHROPIC_KEY, admin_client)


@pytest.mark.parametrize("status", [401, 429, 500])
def test_openai_errors_echoing_the_key_are_stored_scrubbed(status, openai_key, admin_user, admin_client, tool_world, native_profile):
    with FakeOpenAIAPI() as api:
        api.script(OpenAIErrorReply(status, echoes(OPENAI_KEY)))
        provider = OpenAIProvider(api_key=OPENAI_KEY, base_url=api.url, model="gpt-test", max_retries=0, timeout=10)
        conversation, outcome = converse(admin_user, "What is the weather in Paris?", profile=native_profile, provider=provider)
    assert outcome.reason == "error" and not leaks(str(outcome), OPENAI_KEY)
    assert_no_key_anywhere(conversation, OPENAI_KEY, admin_client)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_anonymous_socket_carries_no_echoed_key(redis, anthropic_key, admin_user, tool_world, native_profile):
    def failed_conversation():
        with FakeMessagesAPI() as api:
            api.script(ErrorReply(401, echoes(ANTHROPIC_KEY)))
            provider = AnthropicProvider(api_key=ANTHROPIC_KEY, base_url=api.url, max_retries=0, timeout=10)
            conversation, _ = converse(admin_user, "What is the weather in Paris?", profile=native_profile, provider=provider)
        link = sharing.create_link(conversation, user=admin_user, hours=1)
        return conversation.events.count(), sharing.token_for(link)

    count, token = await database_sync_to_async(failed_conversation)()
    communicator = await connect_shared(token)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    frames = [await communicator.receive_from(timeout=10) for _ in range(count)]
    await communicator.disconnect()
    assert any("Incorrect API key provided" in frame for frame in frames)
    assert not any(leaks(frame, ANTHROPIC_KEY) for frame in frames)


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_a_200_that_is_not_json_says_so(vendor, admin_user, tool_world, native_profile):
    page = RawBody("<html><body><h1>502 Bad Gateway</h1></body></html>")
    if vendor == "anthropic":
        api = FakeMessagesAPI()
        make = lambda: AnthropicProvider(api_key="sk-test", base_url=api.url, max_retries=0, timeout=10)  # noqa: E731
    else:
        api = FakeOpenAIAPI()
        make = lambda: OpenAIProvider(api_key="sk-test", base_url=api.url, model="gpt-test", max_retries=0, timeout=10)  # noqa: E731
    with api:
        api.script(page)
        conversation, outcome = converse(admin_user, "What is the weather in Paris?", profile=native_profile, provider=make())
    [error] = events_of(conversation, "error")
    message = error.payload["message"]
    assert outcome.reason == "error" and "AttributeError" not in message and "model_dump" not in message, message
    assert "not JSON" in message or "not a stream" in message, message
