"""An OpenAI conversation in a real browser: a profile naming OpenAI (no key here, so the offline
demo agent speaks OpenAI's wire, labelled), its events streaming live over the WebSocket from the
Celery worker; and the compare view with a vendor and wire style per side, figures by one accounting."""
from __future__ import annotations

import pytest

from playground.conversations.models import Event
from tests.browser.conftest import screenshot
from tests.browser.test_conversation_pages import event_types, timeline_sequences, wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WEATHER = "mcp__weather__get_forecast"


def test_an_openai_conversation_streams_live(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="OpenAI hosted search", tool_search_mode="true", wire_style="server",
                                          provider="openai")
    page = logged_in_page
    page.goto("/conversations/")
    form = "[data-testid=new-conversation-form]"
    page.select_option(f"{form} [name=profile]", str(profile.pk))
    page.fill(f"{form} [name=message]", "What is the weather forecast for Paris?")
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    assert page.locator("[data-testid=offline-badge]").count() >= 1  # labelled as the demo agent
    wait_for_runs_finished(page, 1)
    assert page.locator("[data-testid=wire-style]").first.inner_text() == "openai-hosted"
    search = page.locator("[data-event-type=toolsearch_query]").first
    assert "Server-side search (simulated)" in search.inner_text()
    assert "Simulated by the offline demo agent" in search.locator("[data-testid=toolsearch-note]").inner_text()
    assert WEATHER in search.locator("[data-testid=loaded-tool]").all_inner_texts()

    # A second message over the socket: its events arrive live, in order, with no page load.
    page.evaluate("window.__sameDocument = 'yes'")
    last = max(timeline_sequences(page))
    page.fill("[data-testid=send-form] [data-testid=message-input]", "Post a message to the Slack channel general saying hi")
    page.click("[data-testid=send-form] [data-testid=send]")
    page.wait_for_function(
        "last => Array.from(document.querySelectorAll('[data-testid=timeline] [data-event-type=toolsearch_query]'))"
        ".some(e => Number(e.dataset.sequence) > last)", arg=last, timeout=60_000)
    wait_for_runs_finished(page, 2)
    assert page.evaluate("window.__sameDocument") == "yes"
    live = timeline_sequences(page)
    assert live == sorted(live) and len(live) == len(set(live))
    conversation_id = int(page.get_attribute("[data-testid=conversation]", "data-conversation"))
    saved = list(Event.objects.filter(conversation_id=conversation_id).exclude(type="message").order_by("sequence")
                 .values_list("sequence", flat=True))
    assert live == saved  # exactly the saved events, each once
    assert {e.payload["provider"] for e in Event.objects.filter(conversation_id=conversation_id, type="model_request")} == {"demo-openai"}
    screenshot(page, "openai-conversation-live")


def test_compare_openai_hosted_search_against_claude_on_one_profile(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="Tool search on", tool_search_mode="true")
    page = logged_in_page
    page.goto("/conversations/compare/")
    page.select_option("[name=profile_a]", str(profile.pk))
    page.select_option("[name=profile_b]", str(profile.pk))
    page.select_option("[name=wire_a]", "openai-hosted")
    page.select_option("[name=wire_b]", "anthropic-native")
    assert page.locator("[name=wire_a] option[value=anthropic-server]").is_disabled()  # no key: the demo cannot play it
    page.fill("[name=message]", "What is the weather forecast for Paris?")
    screenshot(page, "compare-vendors-form")
    page.click("[data-testid=start-compare]")
    page.wait_for_selector("body[data-page=compare-view]")
    panels = page.locator("[data-testid=conversation]")
    left = f"#conversation-{panels.nth(0).get_attribute('data-conversation')}"
    right = f"#conversation-{panels.nth(1).get_attribute('data-conversation')}"
    wait_for_runs_finished(page, 1, left)
    wait_for_runs_finished(page, 1, right)
    assert "toolsearch_query" in event_types(page, left) and "toolsearch_query" in event_types(page, right)
    # The figures follow the runs (fetched again as events arrive) and name each side's wire.
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=figures-wire]')).map(e => e.textContent).join()"
        " === 'openai-hosted,native'", timeout=60_000)
    page.wait_for_function(  # the figures caught up with both panels' own totals
        "() => { const f = Array.from(document.querySelectorAll('[data-testid=figures-tool-tokens]')).map(e => e.dataset.value);"
        " const t = Array.from(document.querySelectorAll('[data-testid=tokens-total]')).map(e => e.dataset.tokensCost);"
        " return f.length === 2 && f.join() === t.join() && Array.from(document.querySelectorAll('[data-testid=figures-input]'))"
        ".every(e => Number(e.dataset.value) > 0); }", timeout=60_000)
    sources = page.locator("[data-testid=figures-usage-source]").all_inner_texts()
    assert all(s.startswith("the engine's estimate") for s in sources), sources
    shown = [int(v) for v in page.locator("[data-testid=figures-tool-tokens]").evaluate_all("els => els.map(e => e.dataset.value)")]
    for panel, value in zip((left, right), shown):
        turns = Event.objects.filter(conversation_id=int(panel.rsplit("-", 1)[1]), type="turn_started", parent_sequence__isnull=True)
        assert value == sum(t.payload["tokens"]["sent_tokens"] + t.payload["tokens"]["announcement_tokens"] for t in turns)
    screenshot(page, "compare-vendors")
