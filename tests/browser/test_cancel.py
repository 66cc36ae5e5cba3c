"""Cancel in a real browser: the demo agent runs the demo MCP server's slow tool on the live worker,
the person clicks Cancel, and the page shows the run cancelled — a note in the chat, the cancelled
event in the timeline and "Cancelled" in the header — live and after a reload. The next message runs."""
from __future__ import annotations

import json
import sys
import time

import pytest

from playground.conversations import services
from playground.conversations.models import Conversation
from playground.mcp_servers.models import McpServer
from playground.registry.models import AgentProfile, Tool
from tests.browser.conftest import screenshot
from tests.browser.test_registry_pages import seed_catalog
from tests.mcp_servers.conftest import DEMO_ARGS
from tests.polling import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SLOW = "mcp__demo__slow"
STATUS = "[data-testid=conversation] [data-testid=status]"


def slow_log(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_cancelled_on_the_page(page) -> None:
    page.wait_for_selector(f"{STATUS}[data-status=cancelled]")
    assert page.inner_text(STATUS).strip() == "Cancelled"
    note = page.locator("[data-testid=chat] [data-testid=chat-cancelled]")
    assert note.count() == 1
    assert "Cancelled by alice" in note.inner_text() and SLOW in note.inner_text()
    timeline = page.locator("[data-testid=timeline] [data-event-type=cancelled]")
    assert timeline.count() == 1 and SLOW in timeline.inner_text()
    result = page.locator("[data-testid=timeline] [data-event-type=tool_result]").last
    assert "Cancelled by the person while it ran" in result.text_content()  # inside a closed <details>


def test_cancel_stops_a_slow_tool_and_the_page_says_cancelled(logged_in_page, admin_user, tmp_path):
    log = tmp_path / "slow.jsonl"
    McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                             env={"DEMO_SERVER_SLOW_LOG": str(log)}, status="connected")
    Tool.objects.create(name=SLOW, description="Sleep for the given number of seconds, then answer.", server_name="demo",
                        source=Tool.Source.IMPORTED,
                        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]})
    profile = AgentProfile.objects.create(name="Slow tool loaded", tool_search_mode="false")
    conversation = services.start_conversation(admin_user, profile=profile, provider="demo")
    page = logged_in_page
    page.goto(f"/conversations/{conversation.pk}/")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation][data-status=idle]")
    page.fill("[data-testid=send-form] [data-testid=message-input]", "Run the slow tool for 20 seconds")
    page.click("[data-testid=send-form] [data-testid=send]")
    page.wait_for_selector("[data-testid=timeline] [data-event-type=tool_call]")
    wait_until(lambda: any(e["event"] == "started" for e in slow_log(log)), "the slow tool running on the MCP server")
    assert page.get_attribute(STATUS, "data-status") == "running"

    clicked = time.monotonic()
    page.click("[data-testid=cancel]")
    assert_cancelled_on_the_page(page)
    took = time.monotonic() - clicked
    assert took < 15, f"the page said cancelled {took:.1f} s after the click"  # the tool would have run 20 s
    # The server was told through the protocol (notifications/cancelled), and stopped sleeping.
    assert wait_until(lambda: [e for e in slow_log(log) if e["event"] == "cancelled"], "the server heard the cancel")
    screenshot(page, "conversation-cancelled")

    page.reload()  # the full page renders the same templates
    page.wait_for_selector("body[data-page=conversation]")
    assert_cancelled_on_the_page(page)

    # Not stuck: the next message runs to the end.
    page.fill("[data-testid=send-form] [data-testid=message-input]", "Run the slow tool for 1 seconds")
    page.click("[data-testid=send-form] [data-testid=send]")
    page.wait_for_selector(f"{STATUS}[data-status=idle]", timeout=60_000)
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.IDLE
    assert "slept 1.0 s" in page.locator("[data-testid=timeline] [data-event-type=tool_result]").last.text_content()


def test_a_cancel_that_arrives_after_the_answer_says_the_run_had_already_finished(logged_in_page, admin_user):
    # The person clicks Cancel just as the final answer lands: by the time the click reaches the
    # server the run is over. The page says so instead of leaving "Idle" unexplained.
    seed_catalog()
    conversation = services.start_conversation(admin_user, provider="demo")
    page = logged_in_page
    page.goto(f"/conversations/{conversation.pk}/")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation][data-status=idle]")
    page.fill("[data-testid=send-form] [data-testid=message-input]", "What time is it in Tokyo?")
    page.click("[data-testid=send-form] [data-testid=send]")
    page.wait_for_selector("[data-testid=chat] [data-testid=chat-message][data-role=assistant]", timeout=60_000)
    page.wait_for_selector(f"{STATUS}[data-status=idle]", timeout=60_000)
    # The button hid as the status changed; the click that was already on its way is this submit.
    page.locator("[data-testid=conversation] .cancel-form").evaluate("form => form.requestSubmit()")
    notice = page.wait_for_selector("[data-testid=notice][data-kind=info]")
    assert "already finished before your cancel arrived" in notice.inner_text()
    assert notice.is_visible()
    assert page.inner_text(STATUS).strip() == "Idle"
    assert page.locator("[data-testid=chat] [data-testid=chat-cancelled]").count() == 0  # nothing was cancelled
    screenshot(page, "conversation-cancel-after-answer")
