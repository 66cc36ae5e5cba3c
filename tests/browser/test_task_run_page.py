"""The task run page in Chromium against the live server and worker: the panel and the per-task grid
follow the run live over its socket (queued → done, no reload) with the demo agent's conversations,
then show the chart, the table per profile and the grid linking to each conversation. And cancel: a
run whose task is in a slow tool call is cancelled from its page, live."""
from __future__ import annotations

import sys
import time

import pytest

from playground.agenteval import services
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.conversations.models import Conversation
from playground.mcp_servers.models import McpServer
from playground.queueing import task_named
from playground.registry.models import AgentProfile, Tool
from tests.agenteval.conftest import TIME, WEATHER
from tests.browser.conftest import screenshot
from tests.browser.test_cancel import SLOW, slow_log
from tests.mcp_servers.conftest import DEMO_ARGS
from tests.polling import wait_until
from tests.conversations.conftest import tool_world  # noqa: F401 - the fixture, used by name

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PANEL = "[data-testid=task-run-panel]"


@pytest.mark.usefixtures("tool_world")
def test_the_run_page_updates_live_and_draws_the_chart(logged_in_page, asgi_server, admin_user, monkeypatch):
    on = AgentProfile.objects.create(name="Demo on", tool_search_mode="true", wire_style="native", provider="demo")
    off = AgentProfile.objects.create(name="Demo off", tool_search_mode="false", wire_style="native", provider="demo")
    task_set = TaskSet.objects.create(name="browser tasks", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="tokyo", query="What time is it in Tokyo?", expected_tools=[TIME], position=1)
    task_set.tasks.create(external_id="paris", query="What is the weather forecast for Paris?", expected_tools=[WEATHER], position=2)
    with monkeypatch.context() as held:
        held.setattr(services, "queue_advance", lambda run_id: None)  # held back until the page watches
        run = services.start_run(task_set, [on, off], concurrency=2, user=admin_user)

    page = logged_in_page
    page.goto(f"/agent-eval/runs/{run.pk}/")
    page.wait_for_selector(f"{PANEL}[data-status=queued]")
    assert page.locator("[data-testid=cancel-run]").is_visible()
    assert page.locator("[data-testid=no-chart]").count() == 1
    cells = page.locator("[data-testid=task-grid] [data-testid=task-cell]")
    assert cells.count() == 4 and all(cells.nth(i).get_attribute("data-status") == "pending" for i in range(4))
    page.evaluate("window.__notReloaded = true")
    # The live worker takes it from here (sent to its queue: this test process's default queue is its own).
    task_named("agenteval.advance_run").apply_async(args=(run.pk,), queue=asgi_server.queue)

    page.wait_for_selector(f"{PANEL}[data-status=done]", timeout=90_000)
    assert page.evaluate("window.__notReloaded") is True  # the panel changed over the socket, not by a reload
    assert page.inner_text("[data-testid=task-run-progress]").startswith("4 / 4")
    # The grid followed too: every cell ended, with its outcome and its conversation's link, no reload.
    page.wait_for_function("document.querySelectorAll('[data-testid=task-cell][data-status=done]').length === 4")
    assert page.locator("[data-testid=task-grid] [data-testid=task-cell] a[href^='/conversations/']").count() == 4
    assert page.locator("[data-testid=task-grid] [data-outcome]").count() == 4
    live_grid = page.inner_text("[data-testid=task-grid]")
    assert page.evaluate("window.__notReloaded") is True
    assert not page.locator("[data-testid=cancel-run]").is_visible()  # nothing left to cancel
    assert page.locator("[data-testid=success-chart]").count() == 2  # against tokens and against dollars
    points = page.locator("[data-testid=success-chart]").first.locator("[data-testid=chart-point]")
    assert sorted(points.nth(i).get_attribute("data-profile") for i in range(points.count())) == ["Demo off", "Demo on"]
    # As drawn in Chromium: no label's box covers another's (selectors.place_labels).
    boxes = page.evaluate("""() => [...document.querySelectorAll('[data-testid=success-chart]')].map(chart =>
        [...chart.querySelectorAll('[data-testid=chart-label]')].map(t => { const r = t.getBBox(); return [r.x, r.y, r.x + r.width, r.y + r.height]; }))""")
    for labels in boxes:
        assert len(labels) == 2 and not any(a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
                                            for i, a in enumerate(labels) for b in labels[i + 1:]), labels
    rows = page.locator("[data-testid=profile-table] tbody tr")
    assert rows.count() == 2 and "demo" in rows.first.inner_text()
    screenshot(page, "task-run")

    page.reload()  # the grid is rendered on load from the same cell template: each cell links to its conversation
    assert page.locator("[data-testid=demo-note]").count() == 1
    assert page.inner_text("[data-testid=task-grid]") == live_grid
    links = page.locator("[data-testid=task-grid] a[href^='/conversations/']")
    assert links.count() == 4
    links.first.click()
    page.wait_for_selector("[data-testid=conversation]")


def test_cancel_on_the_run_page_stops_the_running_task_and_the_rest(logged_in_page, asgi_server, admin_user, tmp_path,
                                                                     monkeypatch):
    # The demo MCP server's slow tool holds the first task mid-call; the others wait their turn.
    log = tmp_path / "slow.jsonl"
    McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                             env={"DEMO_SERVER_SLOW_LOG": str(log)}, status="connected")
    Tool.objects.create(name=SLOW, description="Sleep for the given number of seconds, then answer.", server_name="demo",
                        source=Tool.Source.IMPORTED,
                        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]})
    profile = AgentProfile.objects.create(name="Slow tool loaded", tool_search_mode="false", provider="demo")
    task_set = TaskSet.objects.create(name="slow tasks", source=TaskSet.Source.UPLOAD)
    for position in range(3):
        task_set.tasks.create(external_id=f"slow-{position}", query="Run the slow tool for 30 seconds", expected_tools=[SLOW],
                              position=position)
    with monkeypatch.context() as held:
        held.setattr(services, "queue_advance", lambda run_id: None)  # held back until the page watches
        run = services.start_run(task_set, [profile], concurrency=1, user=admin_user)

    page = logged_in_page
    page.goto(f"/agent-eval/runs/{run.pk}/")
    page.wait_for_selector(f"{PANEL}[data-status=queued]")
    page.evaluate("window.__notReloaded = true")
    # The run starts on the live worker (its task went to this process's queue: hand it to the worker's).
    task_named("agenteval.advance_run").apply_async(args=(run.pk,), queue=asgi_server.queue)
    page.wait_for_selector("[data-testid=task-cell][data-status=running]")  # the grid follows live
    wait_until(lambda: any(e["event"] == "started" for e in slow_log(log)), "the slow tool running on the MCP server", 60)

    clicked = time.monotonic()
    page.click("[data-testid=cancel-run]")
    page.wait_for_selector(f"{PANEL}[data-status=cancelled]", timeout=30_000)
    took = time.monotonic() - clicked
    assert took < 20, f"the run page said cancelled {took:.1f} s after the click"  # the tool would have run 30 s
    page.wait_for_function("document.querySelectorAll('[data-testid=task-cell][data-status=cancelled]').length === 3")
    assert not page.locator("[data-testid=cancel-run]").is_visible()
    assert page.inner_text("[data-testid=task-run-progress]").startswith("3 / 3")  # all ended: cancelled counts as ended
    screenshot(page, "task-run-cancelled")

    # One conversation was started and cancelled mid-call (the server heard it); the others never started.
    items = list(TaskRunItem.objects.filter(run=run).order_by("position"))
    assert [i.status for i in items] == ["cancelled"] * 3
    assert items[0].conversation.status == Conversation.Status.CANCELLED and items[0].measures["errors"].get("cancelled")
    assert [i.conversation_id for i in items[1:]] == [None, None]
    assert wait_until(lambda: [e for e in slow_log(log) if e["event"] == "cancelled"], "the server heard the cancel")
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.CANCELLED

    page.reload()  # the same templates on reload
    page.wait_for_selector(f"{PANEL}[data-status=cancelled]")
    assert page.locator("[data-testid=task-cell][data-status=cancelled]").count() == 3
    assert page.locator("[data-testid=cancel-run]").count() == 0


def test_an_every_mode_run_page_fits_1280(logged_in_page, admin_user):
    """Eight loading modes (every mode since tool changes joined) make an eight-column task grid of
    tool-name badges: it scrolls in its own box, the page stays 1280 px wide."""
    from playground.conversations import services as conversation_services
    from playground.conversations.events import ChatMessage, ToolCall, ToolResult, TurnFinished, record_event

    names = ["Tool search off", "Tool search on (native)", "Client-side (gateway)", "Tool changes (predicted)",
             "Tool changes + search", "OpenAI hosted tool_search", "OpenAI client tool_search", "OpenAI functions"]
    profiles = [AgentProfile.objects.create(name=name, tool_search_mode="true", wire_style="native", provider="demo") for name in names]
    task_set = TaskSet.objects.create(name="every mode", source=TaskSet.Source.UPLOAD)
    task = task_set.tasks.create(external_id="paris", query="What is the weather forecast for Paris?", expected_tools=[WEATHER], position=1)
    run = TaskRun.objects.create(task_set=task_set, status="done", created_by=admin_user,
                                 profiles=[{"id": p.pk, "name": p.name, "provider": "demo"} for p in profiles])
    for position, profile in enumerate(profiles):
        conversation = conversation_services.start_conversation(admin_user, profile=profile)
        record_event(conversation, ChatMessage(role="user", text=task.query))
        record_event(conversation, ToolCall(tool_use_id="t1", name=WEATHER))
        record_event(conversation, ToolResult(tool_use_id="t1", name=WEATHER))
        record_event(conversation, TurnFinished(turn=1, stop_reason="end_turn", status="idle", final=True, reason="end_turn"),
                     status=Conversation.Status.IDLE)
        item = TaskRunItem.objects.create(run=run, task=task, profile_name=profile.name, position=position,
                                          conversation=conversation, status="running")
        item.measures = services.measure_item(item)
        item.status = "done"
        item.save()

    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/agent-eval/runs/{run.pk}/")
    grid = page.wait_for_selector("[data-testid=task-grid]")
    assert page.locator("[data-testid=task-grid] [data-outcome=success]").count() == 8
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    box = grid.evaluate("t => ({card: t.closest('.card').getBoundingClientRect().right,"
                        " box: t.parentElement.getBoundingClientRect().right, scrolls: getComputedStyle(t.parentElement).overflowX})")
    assert box["card"] <= 1280 and box["box"] <= box["card"] and box["scrolls"] == "auto", box
    screenshot(page, "task-run-every-mode")
