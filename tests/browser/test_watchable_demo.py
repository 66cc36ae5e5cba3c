"""A demo an audience can watch: a share link opened logged out follows the conversation live (and
stops when revoked), the assistant's text grows as it streams, and presentation mode replays a
finished conversation step by step."""
from __future__ import annotations

import pytest

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation
from tests.browser.conftest import screenshot
from tests.browser.test_conversation_pages import wait_for_runs_finished
from tests.browser.test_readme_demo_path import demo_data, start_conversation  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHAT_MESSAGES = "[data-testid=chat] [data-testid=chat-message]"
# Records, on every change of the chat, the length of the reply being written (0 when none is).
WATCH_STREAMING = """() => {
  window.__streamLengths = [];
  const chat = document.querySelector('[data-testid=chat]');
  new MutationObserver(() => {
    const text = chat.querySelector('[data-testid=streaming-text]');
    if (text) window.__streamLengths.push(text.textContent.length);
  }).observe(chat, {childList: true, subtree: true, characterData: true});
}"""


def test_a_share_link_opened_logged_out_follows_the_conversation_live(browser, asgi_server, logged_in_page, demo_data):  # noqa: F811
    owner = logged_in_page
    conversation = start_conversation(owner, "Tool search on (native)", "What time is it in Tokyo?")
    wait_for_runs_finished(owner, 1)
    owner.select_option("[data-testid=share-form] [name=hours]", label="1 hour")
    owner.click("[data-testid=share-create]")
    url = owner.input_value("[data-testid=share-url]")
    assert "/conversations/shared/" in url

    context = browser.new_context(viewport={"width": 1280, "height": 900})  # no cookies: logged out
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("[data-testid=conversation][data-shared]")
        assert page.locator("[data-testid=user-role]").count() == 0 and page.locator("nav").count() == 0
        assert page.locator("[data-testid=send-form]").count() == 0 and page.locator("[data-testid=cancel]").count() == 0
        before = page.locator(CHAT_MESSAGES).count()
        assert before >= 2
        page.evaluate("window.__sameDocument = 'yes'")
        page.evaluate(WATCH_STREAMING)

        owner.fill("[data-testid=send-form] [data-testid=message-input]", "Post a message to the Slack channel general")
        owner.click("[data-testid=send-form] [data-testid=send]")
        page.wait_for_function("n => document.querySelectorAll('[data-testid=chat] [data-testid=chat-message]').length >= n + 2",
                               arg=before, timeout=60_000)
        wait_for_runs_finished(page, 2)
        assert page.evaluate("window.__sameDocument") == "yes"  # live, over the share link's socket
        assert page.evaluate("window.__streamLengths.length") >= 1  # the reply streamed to the audience too
        screenshot(page, "share-link-watching")

        # Revoked: the open page is told, and the link no longer opens.
        owner.goto(f"/conversations/{conversation}/")
        owner.click("[data-testid=share-revoke]")
        page.wait_for_selector("[data-testid=share-ended]:not([hidden])", timeout=30_000)
        response = page.goto(url)
        assert response.status == 410 and page.locator("[data-testid=share-refused]").is_visible()
        assert "revoked" in page.locator("[data-testid=share-refused]").inner_text()
    finally:
        context.close()


def test_the_assistants_text_grows_as_it_streams(logged_in_page, demo_data):  # noqa: F811
    page = logged_in_page
    start_conversation(page, "Tool search on (native)", "What time is it in Tokyo?")
    wait_for_runs_finished(page, 1)
    page.evaluate(WATCH_STREAMING)
    answers = page.locator(CHAT_MESSAGES + "[data-role=assistant]").count()
    page.fill("[data-testid=send-form] [data-testid=message-input]", "What is the weather forecast for Paris?")
    page.click("[data-testid=send-form] [data-testid=send]")
    wait_for_runs_finished(page, 2)
    lengths = page.evaluate("window.__streamLengths")
    # One bubble grew piece by piece (several lengths, rising) before the message replaced it.
    assert len(set(lengths)) >= 2 and max(lengths) > min(lengths), lengths
    assert page.locator("[data-testid=chat-streaming]").count() == 0
    assert page.locator(CHAT_MESSAGES + "[data-role=assistant]").count() >= answers + 2
    page.reload()
    page.wait_for_selector("[data-testid=conversation][data-status=idle]")
    assert page.locator("[data-testid=chat-streaming]").count() == 0
    assert page.locator(CHAT_MESSAGES + "[data-role=assistant]").count() >= answers + 2


def finished_conversation(owner) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="Presenting the weather")
    record_event(conversation, ev.ChatMessage(role="user", text="What is the weather forecast for Paris?"))
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="offline-demo-agent", wire="native",
                                                     loaded_tools=["ToolSearch"], deferred_tools=["mcp__weather__get_forecast"]))
    record_event(conversation, ev.ToolCall(tool_use_id="t1", name="mcp__weather__get_forecast", arguments={"city": "Paris"}),
                 turn_sequence=turn.sequence)
    record_event(conversation, ev.ToolResult(tool_use_id="t1", name="mcp__weather__get_forecast",
                                             content=[{"type": "text", "text": "Sunny, 21 degrees"}]), turn_sequence=turn.sequence)
    record_event(conversation, ev.ChatMessage(role="assistant", text="I called the forecast tool: it will be sunny in Paris, 21 degrees."),
                 turn_sequence=turn.sequence)
    record_event(conversation, ev.TurnFinished(turn=1, stop_reason="end_turn", status="idle", final=True, reason="end_turn"),
                 turn_sequence=turn.sequence)
    return conversation


def test_presentation_mode_replays_a_finished_conversation_step_by_step(logged_in_page, admin_user):
    conversation = finished_conversation(admin_user)
    page = logged_in_page
    page.goto(f"/conversations/{conversation.pk}/")
    page.click("[data-testid=present-link]")
    page.wait_for_selector("[data-testid=presentation][data-shown='0']")
    assert page.locator("[data-present-stage] [data-sequence]:visible").count() == 0
    assert page.inner_text("[data-testid=present-progress]") == "step 0 of 6"
    # Large type: the replay is read from across a room.
    assert float(page.eval_on_selector("[data-testid=presentation]", "e => parseFloat(getComputedStyle(e).fontSize)")) >= 20

    page.click("[data-testid=present-step]")
    page.wait_for_selector("[data-testid=presentation][data-shown='1']")
    visible = page.locator("[data-present-stage] [data-sequence]:visible")
    assert visible.count() == 1 and "What is the weather forecast for Paris?" in visible.first.inner_text()

    page.select_option("[data-testid=present-pace]", "0.5")
    page.click("[data-testid=present-play]")
    page.wait_for_selector("[data-testid=presentation][data-playing=true]")
    page.wait_for_selector("[data-testid=presentation][data-shown='6']", timeout=20_000)
    page.wait_for_selector("[data-testid=presentation][data-playing=false]")
    assert "the end" in page.inner_text("[data-testid=present-progress]")
    answer = page.locator("[data-present-stage] [data-testid=chat-message][data-role=assistant] .chat-text")
    page.wait_for_function("e => e.textContent.endsWith('21 degrees.')", arg=answer.element_handle())
    assert page.locator("[data-present-stage] [data-event-type=tool_call]").is_visible()
    screenshot(page, "presentation")
    page.click("[data-testid=present-restart]")
    page.wait_for_selector("[data-testid=presentation][data-shown='0']")
    assert page.locator("[data-present-stage] [data-sequence]:visible").count() == 0
