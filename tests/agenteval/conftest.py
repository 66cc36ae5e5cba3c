"""Task run fixtures: the conversations' small tool world, profiles on the real Anthropic SDK against the
Messages API double, and a scripted model that searches, picks and calls (sometimes wrongly)."""
from __future__ import annotations

from typing import Any

import pytest

from playground.celery_app import app
from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply, tool_use_reply
from tests.conversations.conftest import make_profile, tool_world  # noqa: F401 - the fixture, used by name
from tests.registry.conftest import fresh_adapter_caches  # noqa: F401 - autouse fixture

TIME = "mcp__time__get_current_time"
SLACK = "mcp__slack__post_message"
ISSUE = "mcp__github__create_issue"
WEATHER = "mcp__weather__get_forecast"
REPLY_USAGE = {"input_tokens": 1000, "output_tokens": 50}

# Each task's request, and what the scripted model does step by step (one step per model request),
# with ToolSearch available ("on") and with every tool loaded ("off").
PLANS: dict[str, dict[str, list[tuple]]] = {
    "What time is it in Tokyo?": {
        "on": [("search", f"select:{TIME}"), ("call", TIME, {"timezone": "Asia/Tokyo"}), ("text",)],
        "off": [("call", TIME, {"timezone": "Asia/Tokyo"}), ("text",)],
    },
    "Post 'hi' to the #general Slack channel": {
        "on": [("call", SLACK, {"channel": "general", "text": "hi"}), ("text",)],  # not loaded yet: an error
        "off": [("call", ISSUE, {"title": "hi"}), ("text",)],  # the wrong tool (behind an ask rule)
    },
    "Open a GitHub issue titled 'Login broken'": {
        "on": [("search", f"select:{ISSUE}"), ("call", ISSUE, {"title": "Login broken"}), ("text",)],
        "off": [("call", SLACK, {"channel": "general", "text": "Login broken"}), ("text",)],
    },
    "Weather forecast for Paris": {
        "on": [("search", f"select:{WEATHER}"), ("call", WEATHER, {"city": "Paris"}), ("text",)],
        "off": [("call", "echo", {"text": "Paris"}), ("call", WEATHER, {"city": "Paris"}), ("text",)],
    },
}


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else next(b["text"] for b in content if b.get("type") == "text")


def scripted_model(body: dict[str, Any]) -> dict[str, Any]:
    """The reply to one Messages API request: the task's plan, at the step this conversation is at."""
    mode = "on" if any(t.get("name") == "ToolSearch" for t in body.get("tools", [])) else "off"
    step = sum(1 for m in body["messages"] if m["role"] == "assistant")
    plan = PLANS[first_text(body)][mode]
    action = plan[min(step, len(plan) - 1)]
    if action[0] == "search":
        return tool_use_reply("ToolSearch", {"query": action[1]}, **REPLY_USAGE)
    if action[0] == "call":
        return tool_use_reply(action[1], action[2], **REPLY_USAGE)
    return text_reply("Done.", **REPLY_USAGE)


@pytest.fixture
def scripted_api(settings):
    with FakeMessagesAPI() as server:
        server.script(*[scripted_model] * 500)
        settings.ANTHROPIC_API_KEY = "sk-test"
        settings.ANTHROPIC_BASE_URL = server.url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield server


@pytest.fixture
def claude_profiles(db):
    on = make_profile("on", model="claude-sonnet-4-5", provider="anthropic")
    off = make_profile("off", tool_search_mode="false", model="claude-sonnet-4-5", provider="anthropic")
    return on, off


@pytest.fixture
def eager_celery(settings):
    """Tasks run inline where they are queued (after each commit), the run's whole chain in this thread."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous
