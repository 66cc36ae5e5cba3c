"""Conversation fixtures: a small tool world, the fake Messages API, providers and helpers to run the loop."""
from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

from playground.conversations import services
from playground.conversations.loop import run_conversation
from playground.conversations.lease import RunLease, rest_paused_run
from playground.conversations.models import Conversation, Event
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.testing.fake_api import FakeMessagesAPI
from playground.registry.models import AgentProfile, Tool
from tests.conftest import require_service
from tests.registry.conftest import fresh_adapter_caches, make_tool  # noqa: F401 (autouse fixture; one row helper)

TIME_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "description": "IANA timezone name (e.g., 'America/New_York')."}},
    "required": ["timezone"],
}


@pytest.fixture
def tool_world(db):
    """Two built-ins always loaded, and deferred MCP tools (catalog-only: the executor simulates them)."""
    return [
        make_tool("echo", "Return the given text unchanged.", source=Tool.Source.BUILTIN,
                  input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        make_tool("calculator", "Evaluate an arithmetic expression safely.", source=Tool.Source.BUILTIN,
                  input_schema={"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
        make_tool("mcp__time__get_current_time", "Get current time in a specific timezone", input_schema=TIME_SCHEMA,
                  source=Tool.Source.IMPORTED),
        make_tool("mcp__github__create_issue", "Create a new issue in a GitHub repository", source=Tool.Source.IMPORTED,
                  input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        make_tool("mcp__slack__post_message", "Post a message to a Slack channel", source=Tool.Source.IMPORTED,
                  input_schema={"type": "object", "properties": {"channel": {"type": "string"}, "text": {"type": "string"}}}),
        make_tool("mcp__weather__get_forecast", "Weather forecast for a city", source=Tool.Source.IMPORTED,
                  input_schema={"type": "object", "properties": {"city": {"type": "string"}}}),
    ]


def make_profile(name: str, **fields) -> AgentProfile:
    fields.setdefault("tool_search_mode", "true")
    fields.setdefault("wire_style", "native")
    return AgentProfile.objects.create(name=name, **fields)


@pytest.fixture
def native_profile(db):
    return make_profile("native")


@pytest.fixture
def client_profile(db):
    return make_profile("client", wire_style="client")


@pytest.fixture
def off_profile(db):
    return make_profile("off", tool_search_mode="false")


@pytest.fixture
def fake_api():
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def claude(fake_api):
    return AnthropicProvider(api_key="sk-test", base_url=fake_api.url, max_retries=2, timeout=5)


def converse(user, text: str, *, profile=None, provider=None, conversation: Conversation | None = None, executor=None):
    """Start (or continue) a conversation, store the person's message and run the loop in-process."""
    conversation = conversation or services.start_conversation(user, profile=profile)
    services.send_message(conversation, text, user=user, enqueue=False)
    outcome = run_as_the_task(conversation.pk, provider=provider, executor=executor)
    conversation.refresh_from_db()
    return conversation, outcome


def run_as_the_task(conversation_id: int, **kwargs):
    """`run_conversation` under the run lease, as the Celery task runs it: a claimed run has a
    heartbeat (a run without one is one no worker has taken, which a cancel ends at once)."""
    token = Conversation.objects.values_list("run_token", flat=True).get(pk=conversation_id)
    with RunLease(conversation_id, token, interval=3600) as lease:
        assert lease.claimed, "the conversation was not waiting for this run"
        outcome = run_conversation(conversation_id, cancel=lease.cancel, **kwargs)
    if outcome.reason == "waiting":
        rest_paused_run(conversation_id, token)
    return outcome


def work(conversation_id: int) -> Conversation:
    """What the Celery workers do with this conversation's queued runs: each task, in turn, until the
    conversation rests (answered, waiting on a person, or failed). The tasks' own code runs, so what
    a task does after a run (a replay's next message) happens as on a worker."""
    from playground.conversations import tasks

    for _ in range(20):
        conversation = Conversation.objects.get(pk=conversation_id)
        if conversation.status != Conversation.Status.RUNNING or not conversation.run_token or conversation.heartbeat_at:
            return conversation
        if conversation.paused_run:
            tasks.resume_conversation_task(conversation_id, conversation.run_token, conversation.paused_run["prompt_sequence"])
        else:
            tasks.run_conversation_task(conversation_id, conversation.run_token)
    raise AssertionError("the conversation never came to rest")


def event_types(conversation: Conversation) -> list[str]:
    return list(Event.objects.filter(conversation=conversation).order_by("sequence").values_list("type", flat=True))


def events_of(conversation: Conversation, kind: str) -> list[Event]:
    return list(Event.objects.filter(conversation=conversation, type=kind).order_by("sequence"))


def redis_available() -> bool:
    from django.conf import settings

    url = urlparse(settings.REDIS_URL)
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def redis(settings):
    require_service(redis_available(), f"Redis at {settings.REDIS_URL}")
    # The run's own prefix (tests/conftest.py) keeps groups apart from a running playground.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": settings.CHANNEL_LAYER_BACKEND,  # the deployment's layer, under this run's prefix
            "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": os.environ["CHANNELS_PREFIX"]},
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield settings.REDIS_URL
    channel_layers.backends.clear()
