"""The prompt inbox, clicked through at 1280×800: a conversation waits on a permission prompt, the
navigation bar counts it live, the inbox lists it with the conversation page's card, an answer given
in the inbox settles it there and on the conversation page, and the run goes on to its end."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import doc_screenshot, screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PENDING = "[data-testid=permission-prompt]:not([data-answered*=o])"


def test_a_prompt_answered_from_the_inbox_lets_the_conversation_go_on(logged_in_page):
    from playground.registry.models import PermissionRule

    seed_catalog()
    PermissionRule.objects.create(effect="ask", pattern="mcp__weather__get_forecast")
    conversation_page = logged_in_page
    conversation_page.set_viewport_size({"width": 1280, "height": 800})
    count = "[data-testid=nav-inbox] [data-testid=inbox-count]"
    assert conversation_page.get_attribute(count, "data-count") == "0"

    conversation_page.goto("/conversations/new/")
    conversation_page.fill("[data-testid=new-conversation-form] [name=message]", "What is the weather forecast for Paris?")
    conversation_page.click("[data-testid=new-conversation-form] button[type=submit]")
    conversation_page.wait_for_selector(PENDING, timeout=60_000)
    # The navigation bar's count follows without a reload.
    conversation_page.wait_for_selector(f"{count}[data-count='1']")
    on_page = json.loads(conversation_page.inner_text(f"{PENDING} [data-testid=prompt-arguments]"))

    inbox = conversation_page.context.new_page()
    inbox.set_viewport_size({"width": 1280, "height": 800})
    inbox.goto("/inbox/")
    card = inbox.wait_for_selector("[data-testid=prompt-card][data-source=conversation][data-pending=yes]")
    assert "mcp__weather__get_forecast" in card.inner_text()
    assert json.loads(inbox.inner_text("[data-testid=prompt-card] [data-testid=prompt-arguments]")) == on_page
    left = inbox.inner_text("[data-testid=prompt-card] [data-testid=prompt-expires]")
    assert left.endswith("s left") and 0 < int(left.split()[0]) <= 300
    assert inbox.get_attribute(count, "data-count") == "1"
    screenshot(inbox, "prompt-inbox")
    doc_screenshot(inbox, "prompt-inbox")

    inbox.click("[data-testid=prompt-card] [data-testid=answer-once]")
    inbox.wait_for_selector("[data-testid=inbox-empty]")
    inbox.wait_for_selector(f"{count}[data-count='0']")

    # The conversation page shows the answer given elsewhere, and the run goes on to its end.
    conversation_page.wait_for_selector("[data-testid=permission-prompt][data-answered=once]")
    assert "approved once by alice" in conversation_page.inner_text("[data-testid=permission-answer]")
    wait_for_runs_finished(conversation_page, 1)
    conversation_page.wait_for_selector("[data-testid=chat-message][data-role=assistant]")
    conversation_page.wait_for_selector(f"{count}[data-count='0']")
    screenshot(conversation_page, "prompt-inbox-conversation-went-on")
    inbox.close()
