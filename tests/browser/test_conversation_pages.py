"""Conversations in a real browser: the demo agent's events stream over the WebSocket (Channels,
Redis layer) from a real Celery worker, a reload shows the same timeline, the compare view, and the list's live filters and the JSON export."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event
from tests.browser.conftest import doc_screenshot, screenshot
from tests.browser.test_registry_pages import seed_catalog

TIMELINE = "[data-testid=conversation] [data-testid=timeline]"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def timeline_sequences(page, root: str = "") -> list[int]:
    selector = f"{root} [data-testid=timeline] [data-testid=event]".strip()
    return [int(s) for s in page.locator(selector).evaluate_all("els => els.map(e => e.dataset.sequence)")]


def event_types(page, root: str = "") -> list[str]:
    selector = f"{root} [data-testid=timeline] [data-testid=event]".strip()
    return page.locator(selector).evaluate_all("els => els.map(e => e.dataset.eventType)")


def wait_for_runs_finished(page, runs: int, root: str = "") -> None:
    """Wait until `runs` agent runs have ended: each run's last event is a status change (→ idle)."""
    page.wait_for_function(
        """([root, runs]) => document.querySelectorAll(
               `${root} [data-testid=timeline] [data-event-type=status]`.trim()).length >= runs
           && !!document.querySelector(`${root} [data-testid=status][data-status=idle]`.trim())""",
        arg=[root, runs],
        timeout=60_000,
    )


def test_demo_agent_events_stream_live_and_survive_a_reload(logged_in_page):
    seed_catalog()
    page = logged_in_page
    page.goto("/conversations/")
    page.wait_for_selector("body[data-page=conversations]")
    screenshot(page, "conversations")
    form = "[data-testid=new-conversation-form]"
    page.fill(f"{form} [name=message]", "What is the weather forecast for Paris?")
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    assert page.locator("[data-testid=offline-badge]").count() >= 1  # labelled as the demo agent

    wait_for_runs_finished(page, 1)
    first_types = event_types(page)
    assert "toolsearch_query" in first_types and "turn_finished" in first_types, first_types
    doc_screenshot(page, "conversation")  # the README's picture (only with UPDATE_DOC_SCREENSHOTS=1)

    # Second message, sent over the socket: the new events must arrive with no page load.
    page.evaluate("window.__sameDocument = 'yes'")
    last = max(timeline_sequences(page))
    page.fill("[data-testid=send-form] [data-testid=message-input]", "Post a message to the Slack channel general")
    page.click("[data-testid=send-form] [data-testid=send]")
    page.wait_for_function(
        "last => Array.from(document.querySelectorAll('[data-testid=timeline] [data-event-type=toolsearch_query]'))"
        ".some(e => Number(e.dataset.sequence) > last)",
        arg=last,
        timeout=60_000,
    )
    wait_for_runs_finished(page, 2)
    assert page.evaluate("window.__sameDocument") == "yes"  # arrived live, not through a reload
    live = timeline_sequences(page)
    assert live == sorted(live) and len(live) == len(set(live)), live  # in order, nothing twice
    assert int(page.get_attribute(TIMELINE, "data-last-sequence")) == max(live)
    live_chat = page.locator("[data-testid=chat] [data-testid=chat-message]").count()
    assert live_chat >= 4  # two messages from the person, two answers
    screenshot(page, "conversation-live")

    page.reload()
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation][data-status=idle]")
    assert page.evaluate("window.__sameDocument") is None  # a real reload
    assert timeline_sequences(page) == live
    assert page.locator("[data-testid=chat] [data-testid=chat-message]").count() == live_chat
    screenshot(page, "conversation-reloaded")


def test_compare_view_runs_both_profiles_side_by_side(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    everything = AgentProfile.objects.create(name="All tools loaded", tool_search_mode="false")
    searching = AgentProfile.objects.create(name="Tool search on", tool_search_mode="true")
    page = logged_in_page
    page.goto("/conversations/compare/")
    page.wait_for_selector("body[data-page=compare] [data-testid=compare-form]")
    page.select_option("[name=profile_a]", str(everything.pk))
    page.select_option("[name=profile_b]", str(searching.pk))
    page.fill("[name=message]", "Create a GitHub issue about the failing build")
    page.click("[data-testid=start-compare]")
    page.wait_for_selector("body[data-page=compare-view]")
    panels = page.locator("[data-testid=conversation]")
    assert panels.count() == 2
    left = f"#conversation-{panels.nth(0).get_attribute('data-conversation')}"
    right = f"#conversation-{panels.nth(1).get_attribute('data-conversation')}"
    wait_for_runs_finished(page, 1, left)
    wait_for_runs_finished(page, 1, right)
    assert "toolsearch_query" not in event_types(page, left)  # every tool loaded: nothing to search
    assert "toolsearch_query" in event_types(page, right)
    page.wait_for_function(
        "() => { const t = document.querySelectorAll('[data-testid=tokens-total]');"
        " return t.length === 2 && Array.from(t).every(e => Number(e.dataset.tokensSent) > 0); }",
        timeout=60_000,
    )
    cost = [int(v) for v in page.locator("[data-testid=tokens-total]").evaluate_all("els => els.map(e => e.dataset.tokensCost)")]
    page.wait_for_selector("[data-testid=token-difference][data-difference]")
    # The headline counts what deferring really sends: schemas and the announced names, per the engine.
    assert int(page.get_attribute("[data-testid=token-difference]", "data-difference")) == cost[0] - cost[1]
    for panel, shown in zip((left, right), cost):
        conversation_id = int(panel.rsplit("-", 1)[1])
        turns = Event.objects.filter(conversation_id=conversation_id, type="turn_started", parent_sequence__isnull=True)
        assert shown == sum(t.payload["tokens"]["sent_tokens"] + t.payload["tokens"]["announcement_tokens"] for t in turns)
    screenshot(page, "compare")


def test_the_list_filters_live_and_a_conversation_exports_its_events(logged_in_page, admin_user, viewer_user):
    tokyo = Conversation.objects.create(owner=admin_user, title="Clocks")
    record_event(tokyo, ev.ChatMessage(role="user", text="What time is it in Tokyo?", author="alice"))
    record_event(tokyo, ev.ChatMessage(role="assistant", text="It is 09:00 in Tokyo."))
    Conversation.objects.create(owner=admin_user, title="Weather in Paris", status=Conversation.Status.FAILED)
    Conversation.objects.create(owner=viewer_user, title="Bob's Tokyo trip")
    page = logged_in_page
    page.goto("/conversations/")
    rows = "[data-testid=conversation-results] [data-testid=conversation-row]"
    page.wait_for_function("sel => document.querySelectorAll(sel).length === 3", arg=rows)

    # Typing searches as you type (htmx), and the address keeps the filter.
    page.fill("[data-testid=conversation-filters] [name=q]", "tokyo")
    page.wait_for_function("sel => document.querySelectorAll(sel).length === 2", arg=rows)
    assert "q=tokyo" in page.url
    page.select_option("[data-testid=conversation-filters] [name=owner]", "alice")
    page.wait_for_function("sel => document.querySelectorAll(sel).length === 1", arg=rows)
    assert "owner=alice" in page.url
    page.reload()  # bookmarkable: the same filters from the address alone
    page.wait_for_function("sel => document.querySelectorAll(sel).length === 1", arg=rows)
    assert page.get_attribute(rows, "data-conversation") == str(tokyo.pk)

    page.goto("/conversations/?status=sleeping")
    assert "sleeping is not a conversation status." in page.inner_text("[data-testid=filter-error]")

    page.goto(f"/conversations/{tokyo.pk}/")
    page.wait_for_selector("body[data-page=conversation] [data-testid=export-link]")
    with page.expect_download() as info:
        page.click("[data-testid=export-link]")
    download = info.value
    assert download.suggested_filename == f"conversation-{tokyo.pk}.json"
    data = json.loads(Path(download.path()).read_text())
    assert data["conversation"]["id"] == tokyo.pk and data["conversation"]["owner"] == "alice"
    assert [(e["type"], e["payload"]["text"]) for e in data["events"]] == [
        ("message", "What time is it in Tokyo?"), ("message", "It is 09:00 in Tokyo.")]


def test_each_turns_figures_are_the_engines_accounting(logged_in_page):
    """A conversation's per-turn line (tool tokens, announcement, baseline, saved share, sent /
    discovered / deferred counts) shows what the engine plans for that turn from the stored history."""
    from playground.conversations.models import Message
    from playground.conversations.subagents import with_agent_tool
    from playground.engine.requests import ConversationState
    from playground.engine.turn import plan_turn
    from playground.registry import adapter
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="Accounting", tool_search_mode="true")
    page = logged_in_page
    page.goto("/conversations/")
    form = "[data-testid=new-conversation-form]"
    page.select_option(f"{form} [name=profile]", str(profile.pk))
    page.fill(f"{form} [name=message]", "What is the weather forecast for Paris?")
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    wait_for_runs_finished(page, 1)
    conversation_id = int(page.get_attribute("[data-testid=conversation]", "data-conversation"))

    history = [{"role": m.role, "content": m.content} for m in Message.objects.filter(conversation_id=conversation_id)]
    adapter.reset_caches()
    turns = page.locator("[data-testid=turn]")
    assert turns.count() >= 2  # the search turn and the turn that carries what it found
    for index in range(turns.count()):
        turn = turns.nth(index).locator("summary").first

        def shown(testid: str, turn=turn) -> str | None:
            found = turn.locator(f"[data-testid={testid}]")
            return found.inner_text() if found.count() else None

        # Turn n is planned from the person's message and the n-1 exchanges before it, over the
        # catalog a conversation runs with (the profile's tools and the Agent tool).
        plan = plan_turn(with_agent_tool(adapter.profile_catalog(profile)), adapter.permission_policy(profile), adapter.agent_settings(profile),
                         ConversationState(messages=history[: 2 * index + 1]), token_counter=adapter.token_counter()).request
        tokens = plan.tokens
        assert int(shown("tokens-sent")) == tokens.sent_tokens
        assert int(shown("tokens-announced") or 0) == tokens.announcement_tokens
        assert int(shown("tokens-baseline")) == tokens.baseline_tokens
        saved = shown("saved-share")
        assert (saved == f"−{tokens.saved_percent:g}%") if tokens.saved_tokens > 0 else saved is None, (saved, tokens)
        assert int(shown("sent-count")) == len(plan.tool_names)
        assert int(shown("discovered-count") or 0) == len(plan.discovered_tools)
        assert int(shown("deferred-count")) == len(plan.deferred_tools)
        if index:  # the search's finds are carried, marked
            assert plan.discovered_tools and int(shown("discovered-count")) == len(plan.discovered_tools)
    screenshot(page, "conversation-accounting")
