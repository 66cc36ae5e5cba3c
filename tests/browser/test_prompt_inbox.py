"""The prompt inbox, clicked through at 1280×800: notifications turned on with a click (never asked on
load), a conversation that waits on a permission prompt, counted live in the navigation bar and
notified, listed in the inbox with the conversation page's card, answered there: the conversation
page shows the answer and the run goes on to its end."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import doc_screenshot, screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PENDING = "[data-testid=permission-prompt]:not([data-answered*=o])"
COUNT = "[data-testid=nav-inbox] [data-testid=inbox-count]"
VIEWPORT = {"width": 1280, "height": 800}
# The browser's Notification API, recorded: whether permission was asked, and what was shown.
RECORD_NOTIFICATIONS = """
window.__asked = 0; window.__shown = [];
class RecordedNotification { constructor(title, options) { window.__shown.push([title, (options || {}).body || ""]); } }
RecordedNotification.permission = "default";
RecordedNotification.requestPermission = () => { window.__asked += 1; RecordedNotification.permission = "granted";
                                                 return Promise.resolve("granted"); };
window.Notification = RecordedNotification;
"""


def test_a_prompt_answered_from_the_inbox_lets_the_conversation_go_on(logged_in_page):
    from playground.registry.models import PermissionRule

    seed_catalog()
    PermissionRule.objects.create(effect="ask", pattern="mcp__weather__get_forecast")
    inbox = logged_in_page
    inbox.context.add_init_script(RECORD_NOTIFICATIONS)
    inbox.set_viewport_size(VIEWPORT)
    inbox.goto("/inbox/")
    inbox.wait_for_selector("[data-testid=inbox-empty]")
    inbox.wait_for_function("sessionStorage.getItem('prompt-inbox-seen') !== null")  # the socket's first frame
    assert inbox.get_attribute(COUNT, "data-count") == "0"
    assert inbox.evaluate("window.__asked") == 0  # nothing asks on load
    inbox.click("[data-testid=inbox-notify]")
    inbox.wait_for_function("document.querySelector('[data-inbox-notify-state]').textContent.startsWith('On')")
    assert inbox.evaluate("window.__asked") == 1

    conversation_page = inbox.context.new_page()
    conversation_page.set_viewport_size(VIEWPORT)
    conversation_page.goto("/conversations/new/")
    conversation_page.fill("[data-testid=new-conversation-form] [name=message]", "What is the weather forecast for Paris?")
    conversation_page.click("[data-testid=new-conversation-form] button[type=submit]")
    conversation_page.wait_for_selector(PENDING, timeout=60_000)
    conversation_page.wait_for_selector(f"{COUNT}[data-count='1']")  # live, without a reload
    on_page = json.loads(conversation_page.inner_text(f"{PENDING} [data-testid=prompt-arguments]"))

    # The inbox follows live: the same card, the count, one notification naming the tool.
    card = inbox.wait_for_selector("[data-testid=prompt-card][data-source=conversation][data-pending=yes]")
    assert "mcp__weather__get_forecast" in card.inner_text()
    assert json.loads(inbox.inner_text("[data-testid=prompt-card] [data-testid=prompt-arguments]")) == on_page
    left = inbox.inner_text("[data-testid=prompt-card] [data-testid=prompt-expires]")
    assert left.endswith("s left") and 0 < int(left.split()[0]) <= 300
    inbox.wait_for_selector(f"{COUNT}[data-count='1']")
    shown = inbox.wait_for_function("window.__shown.length && window.__shown").json_value()
    assert len(shown) == 1 and "mcp__weather__get_forecast" in shown[0][1]
    screenshot(inbox, "prompt-inbox")
    doc_screenshot(inbox, "prompt-inbox")

    inbox.click("[data-testid=prompt-card] [data-testid=answer-once]")
    inbox.wait_for_selector("[data-testid=inbox-empty]")
    inbox.wait_for_selector(f"{COUNT}[data-count='0']")

    # The conversation page shows the answer given elsewhere, and the run goes on to its end.
    conversation_page.wait_for_selector("[data-testid=permission-prompt][data-answered=once]")
    assert "approved once by alice" in conversation_page.inner_text("[data-testid=permission-answer]")
    wait_for_runs_finished(conversation_page, 1)
    conversation_page.wait_for_selector("[data-testid=chat-message][data-role=assistant]")
    conversation_page.wait_for_selector(f"{COUNT}[data-count='0']")
    screenshot(conversation_page, "prompt-inbox-conversation-went-on")
    assert inbox.evaluate("window.__shown.length") == 1  # answered prompts are not notified again
    conversation_page.close()
