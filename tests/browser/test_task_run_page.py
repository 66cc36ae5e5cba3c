"""The task run page in Chromium against the live server and worker: the panel follows the run live over
its socket (queued → done, no reload) with the demo agent's conversations, then shows the chart, the
table per profile and the grid linking to each conversation."""
from __future__ import annotations

import pytest

from playground.agenteval import services
from playground.queueing import task_named
from playground.agenteval.models import TaskSet
from playground.registry.models import AgentProfile
from tests.agenteval.conftest import TIME, WEATHER
from tests.browser.conftest import screenshot
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
    page.evaluate("window.__notReloaded = true")
    # The live worker takes it from here (sent to its queue: this test process's default queue is its own).
    task_named("agenteval.advance_run").apply_async(args=(run.pk,), queue=asgi_server.queue)

    page.wait_for_selector(f"{PANEL}[data-status=done]", timeout=90_000)
    assert page.evaluate("window.__notReloaded") is True  # the panel changed over the socket, not by a reload
    assert page.inner_text("[data-testid=task-run-progress]").startswith("4 / 4")
    assert not page.locator("[data-testid=cancel-run]").is_visible()  # nothing left to cancel
    assert page.locator("[data-testid=success-chart]").count() == 2  # against tokens and against dollars
    points = page.locator("[data-testid=success-chart]").first.locator("[data-testid=chart-point]")
    assert sorted(points.nth(i).get_attribute("data-profile") for i in range(points.count())) == ["Demo off", "Demo on"]
    rows = page.locator("[data-testid=profile-table] tbody tr")
    assert rows.count() == 2 and "demo" in rows.first.inner_text()
    screenshot(page, "task-run")

    page.reload()  # the grid is rendered on load: each cell links to its conversation
    assert page.locator("[data-testid=demo-note]").count() == 1
    links = page.locator("[data-testid=task-grid] a[href^='/conversations/']")
    assert links.count() == 4
    links.first.click()
    page.wait_for_selector("[data-testid=conversation]")
