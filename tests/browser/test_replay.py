"""Replay and fork in Chromium at 1280×800: "Replay with…" on a finished demo conversation, another
profile chosen, the replay run by the live server's Celery worker and opened beside its origin; the
per-turn figures on the page are the events' figures."""
from __future__ import annotations

import pytest

from playground.conversations.models import Conversation
from tests.browser.conftest import doc_screenshot, screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog
from tests.conversations.test_replay_side_by_side_view import expected_turns

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def values(page, testid: str) -> list[str]:
    return page.eval_on_selector_all(f"[data-testid=replay-turns] [data-testid={testid}]", "cells => cells.map(c => c.dataset.value)")


def test_replay_with_another_profile_opens_beside_the_origin_with_the_events_figures(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    AgentProfile.objects.create(name="Search on", tool_search_mode="true", wire_style="native")
    every_tool = AgentProfile.objects.create(name="Every tool loaded", tool_search_mode="false", wire_style="native")
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/conversations/")
    form = "[data-testid=new-conversation-form]"
    page.select_option(f"{form} [name=profile]", label="Search on")
    page.fill(f"{form} [name=message]", "What is the weather forecast for Paris?")
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    wait_for_runs_finished(page, 1)
    origin = Conversation.objects.get(pk=int(page.get_attribute("[data-testid=conversation]", "data-conversation")))

    page.click("[data-testid=replay-link]")
    page.select_option("[data-testid=replay-form] [name=profile]", str(every_tool.pk))
    screenshot(page, "replay-form")
    page.click("[data-testid=start-replay]")
    page.wait_for_selector("body[data-page=replay-view]")
    replay = Conversation.objects.get(replay_of=origin)
    wait_for_runs_finished(page, 1, root=f"#conversation-{replay.pk}")
    page.wait_for_selector("[data-testid=replay-progress][data-done=true]", timeout=30_000)
    # The figures fragment is fetched again once the sockets are quiet: wait until it shows every turn.
    turns = {"origin": expected_turns(origin), "replay": expected_turns(Conversation.objects.get(pk=replay.pk))}
    page.wait_for_function("n => document.querySelectorAll('[data-testid=replay-turn]').length === n",
                           arg=max(len(turns["origin"]), len(turns["replay"])), timeout=30_000)
    page.wait_for_function("n => document.querySelectorAll('[data-testid=replay-cost]').length === n",
                           arg=len(turns["replay"]) + 1, timeout=30_000)
    for side, expected in turns.items():
        shown = list(zip(*(values(page, f"{side}-{part}") for part in ("input", "cache-read", "cache-write", "output", "cost"))))
        assert [tuple(int(v) for v in row[:4]) + (round(float(row[4]), 6),) for row in shown[:-1]] == expected
        assert [int(v) for v in shown[-1][:4]] == [sum(t[i] for t in expected) for i in range(4)]
    # Tool search on took a search round trip that the all-tools replay did not.
    assert len(turns["origin"]) > len(turns["replay"])
    difference = float(page.get_attribute("[data-testid=total-cost-difference]", "data-value"))
    assert difference == pytest.approx(sum(t[4] for t in turns["replay"]) - sum(t[4] for t in turns["origin"]), abs=1e-5)
    # Both conversations side by side, live.
    assert page.locator(f"#conversation-{origin.pk}").is_visible() and page.locator(f"#conversation-{replay.pk}").is_visible()
    screenshot(page, "replay-side-by-side")
    doc_screenshot(page, "replay")
