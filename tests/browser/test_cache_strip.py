"""The prompt cache in a real browser: a live demo conversation's cache strips arrive over the socket,
agree with the saved events and the header, and a reload renders the same; the compare view shows
each side's raw input tokens and its cache-priced cost side by side, with the cached all-tools baseline."""
from __future__ import annotations

import uuid

import pytest

from playground.conversations.models import Event
from playground.engine.cache_cost import recorded_cost
from playground.engine.pricing import PriceTable
from tests.browser.conftest import doc_screenshot, screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def long_prompt() -> str:
    """A system prompt above the minimum cacheable length, its own per test: the demo agent's cache is
    shared by every conversation of the worker (as the API's is), so another test's prefix never hits."""
    return f"[{uuid.uuid4().hex}] You are a careful assistant who checks every answer twice. " * 60


def strips_of(conversation_id: int) -> list[dict]:
    return [e.payload for e in Event.objects.filter(conversation_id=conversation_id, type="cache_strip").order_by("sequence")]


def shown_strips(page, root: str = "") -> list[dict]:
    return page.locator(f"{root} [data-testid=cache-strip]".strip()).evaluate_all(
        "els => els.map(e => ({input: +e.dataset.input, written: +e.dataset.written, read: +e.dataset.read,"
        " uncached: +e.dataset.uncached, section: e.dataset.breakSection, text: e.innerText}))")


def test_the_cache_strip_arrives_live_on_every_turn_and_survives_a_reload(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="Cached client list", tool_search_mode="true", wire_style="client",
                                          prompt_cache="on", system_prompt=long_prompt())
    page = logged_in_page
    page.goto("/conversations/")
    form = "[data-testid=new-conversation-form]"
    page.select_option(f"{form} [name=profile]", str(profile.pk))
    page.fill(f"{form} [name=message]", "What is the weather forecast for Paris?")
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    page.evaluate("window.__sameDocument = 'yes'")
    wait_for_runs_finished(page, 1)
    conversation_id = int(page.get_attribute("[data-testid=conversation]", "data-conversation"))
    saved = strips_of(conversation_id)
    turns = Event.objects.filter(conversation_id=conversation_id, type="turn_started", parent_sequence__isnull=True).count()
    assert len(saved) == turns >= 2
    page.wait_for_function("n => document.querySelectorAll('[data-testid=cache-strip]').length === n", arg=turns, timeout=30_000)
    assert page.evaluate("window.__sameDocument") == "yes"  # the strips came over the socket
    live = shown_strips(page)
    assert [(s["input"], s["written"], s["read"], s["uncached"]) for s in live] == [
        (p["input_tokens"], p["cache_write_tokens"], p["cache_read_tokens"], p["uncached_tokens"]) for p in saved]
    # The client-side list style rewrote its tools array when the search loaded tools: said, with what.
    assert live[1]["section"] == "tools" and "prefix first differs at block" in live[1]["text"]
    assert "tools array changed: " in live[1]["text"] and live[1]["read"] < live[0]["written"]
    assert page.locator("[data-testid=cache-strip] [data-testid=cache-agrees]").count() == turns  # the demo reports the model's split
    total = page.locator("[data-testid=cache-total]")
    page.wait_for_function(
        "n => Number(document.querySelector('[data-testid=cache-total]').dataset.requests) === n", arg=turns, timeout=30_000)
    assert int(total.get_attribute("data-input-tokens")) == sum(p["input_tokens"] for p in saved)
    assert int(total.get_attribute("data-cache-read")) == sum(p["cache_read_tokens"] for p in saved)
    screenshot(page, "cache-strip-live")
    # docs/conversations.md's picture (UPDATE_DOC_SCREENSHOTS=1): the header and turn 2's strip, turn 1 folded.
    page.locator("[data-testid=turn]").first.evaluate("e => { e.open = false; }")
    doc_screenshot(page, "cache-strip", scroll_to="[data-testid=cache-total]")
    page.locator("[data-testid=turn]").first.evaluate("e => { e.open = true; }")

    # The cost command's replay of this conversation's export gives the header's figures.
    export = page.request.get(f"/conversations/{conversation_id}/export.json")
    replayed = recorded_cost(export.json(), PriceTable())
    assert sum(r["input_tokens"] for r in replayed.figures["turns"]) == int(total.get_attribute("data-input-tokens"))
    assert sum(r["cache_write_tokens"] for r in replayed.figures["turns"]) == int(total.get_attribute("data-cache-write"))
    assert replayed.figures["total_cost_usd"] == pytest.approx(float(total.get_attribute("data-cost")), abs=1e-6)

    page.reload()
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation][data-status=idle]")
    assert shown_strips(page) == live  # the same template, the same saved events
    assert int(page.get_attribute("[data-testid=cache-total]", "data-input-tokens")) == sum(p["input_tokens"] for p in saved)


def test_compare_shows_raw_tokens_and_cache_priced_cost_side_by_side(logged_in_page):
    from playground.registry.models import AgentProfile

    seed_catalog()
    prompt = long_prompt()
    everything = AgentProfile.objects.create(name="All tools, cached", tool_search_mode="false", prompt_cache="on",
                                             system_prompt=prompt)
    searching = AgentProfile.objects.create(name="Search, cached", tool_search_mode="true", prompt_cache="on",
                                            system_prompt=prompt)
    page = logged_in_page
    page.goto("/conversations/compare/")
    page.select_option("[name=profile_a]", str(everything.pk))
    page.select_option("[name=profile_b]", str(searching.pk))
    page.fill("[name=message]", "What is the weather forecast for Paris?")
    page.click("[data-testid=start-compare]")
    page.wait_for_selector("body[data-page=compare-view]")
    panels = page.locator("[data-testid=conversation]")
    ids = [int(panels.nth(i).get_attribute("data-conversation")) for i in range(2)]
    for conversation_id in ids:
        wait_for_runs_finished(page, 1, f"#conversation-{conversation_id}")
    expected = []
    for conversation_id in ids:
        saved = strips_of(conversation_id)
        expected.append((sum(p["input_tokens"] for p in saved), round(sum(p["cost_usd"] for p in saved), 4),
                         round(sum(p["all_tools"]["cost_usd"] for p in saved), 4), len(saved)))
    page.wait_for_function(
        "counts => Array.from(document.querySelectorAll('[data-testid=cache-total]')).every((e, i) => Number(e.dataset.requests) === counts[i])",
        arg=[e[3] for e in expected], timeout=30_000)
    page.wait_for_function("() => !!document.querySelector('[data-side-raw][data-value]')", timeout=10_000)
    raw = [int(v) for v in page.locator("[data-side-raw]").evaluate_all("els => els.map(e => e.dataset.value)")]
    priced = [round(float(v), 4) for v in page.locator("[data-side-priced]").evaluate_all("els => els.map(e => e.dataset.value)")]
    baseline = [round(float(v), 4) for v in page.locator("[data-side-baseline]").evaluate_all("els => els.map(e => e.dataset.value)")]
    assert raw == [e[0] for e in expected]  # raw input tokens …
    assert priced == [e[1] for e in expected]  # … and the cache-priced cost, both shown
    assert baseline == [e[2] for e in expected]
    assert "left" in page.inner_text("[data-testid=compare-raw]") and "$" in page.inner_text("[data-testid=compare-priced]")
    screenshot(page, "compare-cache")


def test_what_the_model_sees_shows_the_first_turn_and_steady_state_cache_figures(logged_in_page):
    from playground.registry import adapter, previews
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="Cached native", tool_search_mode="true", prompt_cache="on",
                                          system_prompt=long_prompt())
    adapter.reset_caches()
    expected = previews.model_preview(profile).cache
    page = logged_in_page
    page.goto(f"/model/?profile={profile.pk}")
    card = page.wait_for_selector("body[data-page=model-view] [data-testid=model-view-cache]")
    assert float(card.get_attribute("data-first-cost")) == pytest.approx(expected["request"]["first"]["cost_usd"])
    assert float(card.get_attribute("data-steady-cost")) == pytest.approx(expected["request"]["steady"]["cost_usd"])
    assert float(card.get_attribute("data-all-tools-steady-cost")) == pytest.approx(expected["all_tools"]["steady"]["cost_usd"])
    assert int(card.get_attribute("data-input-tokens")) == expected["request"]["first"]["input_tokens"]
    steady = expected["request"]["steady"]
    assert f"{steady['cache_read_tokens']} / {steady['uncached_tokens']}" in page.inner_text("[data-testid=cache-row-request]")
    page.locator("[data-testid=model-view-cache]").scroll_into_view_if_needed()
    screenshot(page, "model-view-cache")
