"""A new user's walk through a conversation: typing and sending with the keyboard, a permission prompt
whose arguments are JSON (with a copy button), and the model's request and response bodies one click away."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_enter_sends_shift_enter_breaks_the_line_and_payloads_read_as_json(logged_in_page):
    from playground.registry.models import PermissionRule

    seed_catalog()
    PermissionRule.objects.create(effect="ask", pattern="mcp__weather__get_forecast")
    page = logged_in_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/conversations/new/")
    box = "[data-testid=new-conversation-form] [name=message]"
    assert "Shift+Enter" in page.locator("[data-testid=new-conversation-form]").inner_text()
    page.click(box)
    page.keyboard.press("Enter")  # an empty box: nothing is sent, no newline either
    assert page.input_value(box) == "" and "/conversations/new/" in page.url
    page.keyboard.type("What is the weather forecast")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("for Paris?")
    assert page.input_value(box) == "What is the weather forecast\nfor Paris?"  # a newline, not a send
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")

    prompt = page.wait_for_selector("[data-testid=permission-prompt]:not([data-answered*=o])", timeout=60_000)
    assert "this conversation" in page.inner_text("[data-testid=answer-always]")
    arguments = page.locator("[data-testid=permission-prompt] [data-testid=prompt-arguments]")
    text = arguments.inner_text()
    assert json.loads(text) and "'" not in text.replace("\\'", "")  # JSON, not a Python repr
    box_height = arguments.evaluate("e => [e.scrollHeight, e.clientHeight]")
    assert box_height[0] <= box_height[1] + 1, box_height  # not clipped
    prompt.query_selector("[data-copy-button]").click()
    page.wait_for_selector("[data-testid=permission-prompt] [data-copy-button][data-copied]")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == json.loads(text)
    screenshot(page, "ux-permission-prompt-json")
    page.click("[data-testid=answer-once]")
    wait_for_runs_finished(page, 1)

    # Enter in the conversation's own box sends the next message (hint beside it).
    assert "Shift+Enter" in page.inner_text("[data-testid=send-hint]")
    page.click("[data-testid=send-form] [data-testid=message-input]")
    page.keyboard.type("Thanks, and the alerts?")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelectorAll('[data-testid=chat-message][data-role=user]').length >= 2")
    assert page.input_value("[data-testid=send-form] [data-testid=message-input]") == ""
    wait_for_runs_finished(page, 2)

    # The exact request and response of a model call: one click on its line.
    request_line = page.locator("[data-testid=model-request]").first
    request_line.locator("summary").click()
    body = json.loads(request_line.locator("[data-testid=request-body]").inner_text())
    assert body["messages"] and "tools" in body and "system" in body
    response_line = page.locator("[data-testid=model-response]").first
    response_line.locator("summary").click()
    assert "stop_reason" in json.loads(response_line.locator("[data-testid=response-body]").inner_text())
    call = page.locator("[data-event-type=tool_call]").first
    call.locator("details > summary").first.click()
    assert isinstance(json.loads(call.locator("[data-testid=call-arguments]").inner_text()), dict)
    request_line.scroll_into_view_if_needed()
    screenshot(page, "ux-model-bodies")
