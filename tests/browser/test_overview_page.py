"""The overview page in the browser: a viewer reaches it from the navigation, reads the known figures,
switches the charted figure and filters by profile."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation
from playground.registry.models import AgentProfile
from tests.browser.conftest import screenshot
from tests.conversations.test_overview import HAIKU, call

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_viewer_reads_tokens_dollars_latency_and_errors_per_profile(page, viewer_user, admin_user):
    viewer_user.groups.add(Group.objects.get(name="viewer"))
    now = timezone.now()
    alpha = AgentProfile.objects.create(name="Overview alpha", tool_search_mode="true")
    beta = AgentProfile.objects.create(name="Overview beta", tool_search_mode="false")
    a = Conversation.objects.create(owner=admin_user, profile=alpha)
    b = Conversation.objects.create(owner=admin_user, profile=beta)
    for hours, duration in ((1, 120), (1, 380), (30, 200), (50, 90)):
        call(a, at=now - timedelta(hours=hours), usage={"input": 1000, "output": 200}, duration=duration)
    call(b, at=now - timedelta(hours=2), usage={"input": 4000, "output": 100}, duration=900, model=HAIKU)
    record_event(b, ev.ErrorEvent(message="overloaded", kind="overloaded"))

    page.goto("/login/")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "pw-bob-12345")
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-page]:not([data-page=login])")
    page.click("header nav >> text='Usage'")
    page.wait_for_selector("body[data-page=overview]")

    rows = page.locator("[data-testid=overview-total]")
    assert rows.count() == 2
    first = rows.nth(0)
    assert first.get_attribute("data-group") == "Overview alpha" and first.get_attribute("data-calls") == "4"
    assert float(first.get_attribute("data-cost-usd")) == pytest.approx(4 * (1000 * 3 + 200 * 15) / 1e6)
    assert float(first.get_attribute("data-p50")) == pytest.approx(160)  # of 90, 120, 200, 380
    second = rows.nth(1)
    assert float(second.get_attribute("data-cost-usd")) == pytest.approx((4000 * 1 + 100 * 5) / 1e6)
    assert second.get_attribute("data-errors") == "1"
    assert "$0.0240" in first.inner_text()
    assert page.locator("[data-testid=chart-line]").count() == 2
    screenshot(page, "page-overview")

    page.click("[data-testid=overview-chart] >> text='Model call p95'")
    page.wait_for_url("**metric=p95_ms**")
    assert "Model call p95 (ms) per day" in page.locator("[data-testid=overview-chart] h2").inner_text()

    page.select_option("select[name=profile]", label="Overview beta")
    page.click("[data-testid=apply-overview]")
    page.wait_for_url(f"**profile={beta.pk}**")
    assert page.locator("[data-testid=overview-total]").count() == 1
    assert page.locator("[data-testid=overview-total]").get_attribute("data-group") == "Overview beta"
    assert page.locator("[data-testid=overview-row]").count() >= 1

    page.select_option("select[name=split]", label="Model")
    page.select_option("select[name=profile]", label="All profiles")
    page.click("[data-testid=apply-overview]")
    page.wait_for_url("**split=model**")
    models = {row.get_attribute("data-group"): row.get_attribute("data-calls")
              for row in page.locator("[data-testid=overview-total]").all()}
    assert models == {"claude-sonnet-4-5": "4", HAIKU: "1", "(unknown)": "0"}  # the error outside any turn: no model
    assert "Per model" in page.locator("[data-testid=overview-totals] h2").inner_text()
    assert "split=model" in page.locator("[data-testid=overview-csv]").get_attribute("href")
    assert page.locator("select[name=user]").count() == 0  # who spent what: admins only
    screenshot(page, "page-overview-per-model")


def test_an_admin_sets_a_budget_and_new_work_is_refused_with_the_reason(logged_in_page, admin_user):
    page = logged_in_page
    profile = AgentProfile.objects.create(name="Budgeted", tool_search_mode="true")
    call(Conversation.objects.create(owner=admin_user, profile=profile), at=timezone.now(),
         usage={"input": 100_000, "output": 1000}, duration=10)  # $0.30 + $0.015
    page.goto("/conversations/overview/")
    assert page.locator("[data-testid=budget-alert]").count() == 0
    page.select_option("[data-testid=budget-form] select[name=profile]", label="Budgeted")
    page.fill("[data-testid=budget-form] input[name=limit]", "0.25")
    page.click("[data-testid=add-budget]")
    budget = page.locator("[data-testid=budget]")
    budget.wait_for()
    assert budget.get_attribute("data-reached") == "true" and budget.get_attribute("data-spent") == "0.315"
    assert page.locator("[data-testid=budget-alert]").inner_text() == "1"  # the navigation tells admins
    screenshot(page, "page-overview-budget")

    page.goto("/conversations/new/")
    page.select_option("select[name=profile]", label="Budgeted")
    page.fill("textarea[name=message]", "hello")
    page.click("[data-testid=start]")
    page.wait_for_selector("text=The daily budget of profile Budgeted is reached: $0.3150 spent today of $0.2500")
    assert Conversation.objects.filter(profile=profile).count() == 1
