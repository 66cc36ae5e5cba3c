"""Feedback in the browser at 1280×800: thumbs down and a comment on a turn, the list filtered by it,
and the annotated conversations saved as a task set in one go (issue 49, item 6)."""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot
from tests.conversations.test_feedback import finished

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_feedback_on_a_turn_then_the_list_filtered_by_it_then_saved_as_tasks(logged_in_page, admin_user):
    from playground.agenteval.models import TaskSet
    from playground.conversations.models import Feedback
    from tests.agenteval.conftest import TIME, WEATHER

    tokyo, turn = finished(admin_user, "What time is it in Tokyo?", TIME)
    paris, _ = finished(admin_user, "Weather forecast for Paris", WEATHER)
    finished(admin_user, "Untouched", TIME)
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})

    for conversation, rating in ((tokyo, "-1"), (paris, "1")):
        page.goto(f"/conversations/{conversation.pk}/")
        form = page.locator("[data-testid=feedback-form]")
        if conversation is tokyo:
            form.locator("select[name=target]").select_option(label="Turn 1")
            form.locator("textarea[name=comment]").fill("searched twice before the clock")
        form.locator(f"input[name=rating][value='{rating}']").check()
        form.locator("[data-testid=feedback-submit]").click()
        page.locator(f"[data-testid=feedback-row][data-rating='{rating}']").wait_for()
    row = page.locator("[data-testid=feedback-row]")
    assert row.count() == 1 and "alice on the conversation" in row.inner_text()
    page.goto(f"/conversations/{tokyo.pk}/")
    assert "on turn 1" in page.locator("[data-testid=feedback-row]").inner_text()
    assert page.locator("[data-testid=feedback]").get_attribute("data-bad") == "1"
    screenshot(page, "conversation-feedback")
    feedback = Feedback.objects.get(conversation=tokyo)
    assert (feedback.turn_sequence, feedback.rating, feedback.comment) == (turn, -1, "searched twice before the clock")

    page.goto("/conversations/?feedback=any")
    rows = page.locator("[data-testid=conversation-row]")
    assert rows.count() == 2
    for index in range(2):
        rows.nth(index).locator("[data-testid=select-conversation]").check()
    page.fill("[data-testid=save-selected] input[name=task_set]", "Reviewed")
    page.click("[data-testid=save-selected-submit]")
    page.wait_for_selector("text=Saved 2 tasks to Reviewed.")
    screenshot(page, "feedback-saved-as-tasks")
    tasks = TaskSet.objects.get(name="Reviewed").tasks.all()
    assert {(t.query, tuple(t.expected_tools)) for t in tasks} == {("What time is it in Tokyo?", (TIME,)),
                                                                  ("Weather forecast for Paris", (WEATHER,))}
