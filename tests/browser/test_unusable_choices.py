"""In the browser: what cannot run is shown disabled with its fix, and bad parameters get a clear message."""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_claude_without_a_key_is_disabled_and_a_server_profile_is_refused(logged_in_page):
    from playground.conversations.models import Conversation
    from playground.registry.models import AgentProfile

    AgentProfile.objects.create(name="server-side search", wire_style="server")
    page = logged_in_page
    page.goto("/conversations/new/")
    claude = page.locator("[data-testid=new-conversation-form] select[name=provider] option[value=anthropic]")
    assert claude.is_disabled() and "set ANTHROPIC_API_KEY" in claude.inner_text()
    page.select_option("[data-testid=new-conversation-form] select[name=profile]", label="server-side search")
    page.fill("[data-testid=new-conversation-form] [name=message]", "What time is it in Tokyo?")
    page.click("[data-testid=start]")
    page.wait_for_selector("[data-testid=new-conversation-form] .errorlist")
    assert "the server wire style needs the Claude (Anthropic API) or OpenAI" in page.inner_text("[data-testid=new-conversation-form]")
    assert not Conversation.objects.exists()
    fits = page.locator("[data-testid=new-conversation-form] select[name=provider]").evaluate(
        "s => s.getBoundingClientRect().right <= s.closest('form').getBoundingClientRect().right")
    assert fits  # a long "unavailable: …" label does not push the select past the card
    screenshot(page, "ux-new-conversation-refused")


def test_inspector_errors_name_the_bad_value_and_say_nothing_about_learning(logged_in_page):
    page = logged_in_page
    page.goto("/inspector/?q=github&profile=999")
    page.wait_for_selector("[data-testid=inspector-results][data-state=error]")
    assert "unknown profile '999'" in page.inner_text("[data-testid=inspector-error]")
    assert page.locator("[data-testid=usage-line]").count() == 0
    assert page.input_value("input[name=max_results]") == "5"
    page.goto("/inspector/?q=github&max_results=0")
    page.wait_for_selector("[data-testid=inspector-results][data-state=error]")
    assert "max_results must be a whole number from 1 to 50" in page.inner_text("[data-testid=inspector-error]")
    screenshot(page, "ux-inspector-bad-max-results")


def test_a_finished_evaluation_shows_no_stale_queued_flash(logged_in_page):
    from playground.engine.catalog_io import toolsets_dir

    if not (toolsets_dir() / "bfcl" / "catalog.jsonl").exists():  # the live server looks where this process does
        pytest.skip(f"the shared toolsets are not at {toolsets_dir()} (set TOOLSETS_DIR)")
    page = logged_in_page
    page.goto("/evaluation/")
    form = page.locator("form:has([name=toolset])")
    form.locator("select[name=toolset]").select_option("bfcl")
    for box in form.locator("input[name=backends]").all():
        if box.is_checked():
            box.uncheck()
    form.locator("input[name=backends][value=claude-code]").check()
    form.locator("input[name=query_limit]").fill("3")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("body[data-page=evaluation-run]")
    page.wait_for_selector("[data-status=done]", timeout=120_000)
    assert "queued" not in page.inner_text("main").lower()
    screenshot(page, "ux-evaluation-done")
