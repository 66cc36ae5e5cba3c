"""Cancel reaches the worker that holds the run and interrupts what it is doing: a real Celery worker,
a slow MCP tool (the demo server's `slow`, which records the `notifications/cancelled` it receives)
and a slow model call (the fake Messages API holding its answer)."""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from playground.conversations import services
from playground.conversations.models import Conversation, Event
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.session_pool import session_pool
from playground.registry.models import Tool
from tests.conversations.conftest import events_of, make_profile, make_tool
from tests.conversations.test_permission_worker import celery_worker, conversation_row, wait_until  # noqa: F401
from tests.mcp_servers.conftest import DEMO_ARGS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
SLOW = "mcp__demo__slow"
# Generous: the tool would run 20 s, a cancel stops it within about AGENT_CANCEL_POLL_SECONDS.
ENDS_WITHIN = 10.0


@pytest.fixture
def claude_in_the_worker(settings, fake_api):
    """The worker's runs talk to the fake Messages API (the in-process worker reads these settings)."""
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "sk-test", fake_api.url
    return fake_api


@pytest.fixture
def slow_server(db, tmp_path):
    log = tmp_path / "slow.jsonl"
    McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                             env={"DEMO_SERVER_SLOW_LOG": str(log)})
    make_tool(SLOW, "Sleep for the given number of seconds, then answer.", source=Tool.Source.IMPORTED,
              input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}})
    yield log
    session_pool().close_all()  # the worker runs in this process: its pooled session (and child) too


def slow_log(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def start(user, text: str) -> Conversation:
    conversation = services.start_conversation(user, profile=make_profile("all loaded", tool_search_mode="false"),
                                               provider="anthropic")
    services.send_message(conversation, text, user=user)
    return conversation


def wait_cancelled(conversation) -> tuple[Conversation, float]:
    asked = time.monotonic()
    row = wait_until(lambda: (lambda c: c if c.status == Conversation.Status.CANCELLED else None)(conversation_row(conversation)),
                     "the conversation cancelled", timeout=60)
    return row, time.monotonic() - asked


def test_cancel_stops_a_running_mcp_tool_through_the_protocol(celery_worker, claude_in_the_worker, slow_server, admin_user):  # noqa: F811 - the imported fixture
    claude_in_the_worker.script(tool_use_reply(SLOW, {"seconds": 20}), text_reply("Fine, something else then."))
    conversation = start(admin_user, "Run the slow tool")
    wait_until(lambda: any(e["event"] == "started" for e in slow_log(slow_server)), "the slow tool running on the server", 60)

    assert services.request_cancel(conversation, user=admin_user)
    row, took = wait_cancelled(conversation)
    print(f"MCP tool call: the run ended {took:.2f} s after the cancel")  # the figure docs/conversations.md quotes
    assert took < ENDS_WITHIN, f"the run ended {took:.1f} s after the cancel"
    cancelled = wait_until(lambda: [e for e in slow_log(slow_server) if e["event"] == "cancelled"],
                           "the server received notifications/cancelled")
    assert cancelled[0]["cancelled_after"] < 20
    event = events_of(row, "cancelled")[0].payload
    assert event["stage"] == "tool_call" and event["interrupted"] == SLOW and event["requested_by"] == admin_user.username
    result = events_of(row, "tool_result")[0].payload
    assert result["is_error"] and result["error"] == "cancelled while it ran"
    assert events_of(row, "turn_finished")[-1].payload["status"] == "cancelled"
    assert row.run_token and row.paused_run is None

    # Never stuck: the next message runs, with a valid history (the fake API rejects a tool_use without a result).
    services.send_message(row, "Something else", user=admin_user)
    wait_until(lambda: conversation_row(row).status == Conversation.Status.IDLE, "the next message answered", 60)
    assert events_of(row, "message")[-1].payload["text"] == "Fine, something else then."
    assert claude_in_the_worker.message_requests[-1].status == 200


def test_cancel_aborts_a_model_call_in_flight(celery_worker, claude_in_the_worker, admin_user, tool_world):  # noqa: F811 - the imported fixture
    answer = threading.Event()
    reached = threading.Event()

    def hold(body):
        reached.set()
        answer.wait(30)  # the model "thinks" until the test lets it go (or 30 s)
        return text_reply("too late")

    claude_in_the_worker.script(hold, text_reply("Hello again."))
    conversation = start(admin_user, "Think hard")
    try:
        assert reached.wait(60), "the model call never reached the API"
        assert services.request_cancel(conversation, user=admin_user)
        row, took = wait_cancelled(conversation)
    finally:
        answer.set()
    print(f"model call: the run ended {took:.2f} s after the cancel")
    assert took < ENDS_WITHIN, f"the run ended {took:.1f} s after the cancel"
    event = events_of(row, "cancelled")[0].payload
    assert event["stage"] == "model_call" and event["interrupted"].startswith("the model call")
    assert not Event.objects.filter(conversation=row, type="model_response").exists()
    services.send_message(row, "Hello?", user=admin_user)
    wait_until(lambda: conversation_row(row).status == Conversation.Status.IDLE, "the next message answered", 60)
    assert events_of(row, "message")[-1].payload["text"] == "Hello again."
