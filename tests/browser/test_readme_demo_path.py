"""README.md's "shortest path through the demo", step by step as written, with the offline demo agent
on the demo data `make run` loads; and a viewer watching someone's conversation live, read-only."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.browser.conftest import screenshot
from tests.browser.test_conversation_pages import event_types, wait_for_runs_finished

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PUSH = "Push files to octo/playground on branch main with the message 'Update docs'"


@pytest.fixture
def demo_data(transactional_db):
    # What `make run` loads (the MCP demo servers aside: the catalog's tools answer as simulated results).
    call_command("load_demo_data", "--skip-servers", verbosity=0)
    # And its search index, built here: `make run`'s worker builds it before anyone types. Without it, a
    # live server that already searched another test's catalog answers from that older index (as it
    # should, saying so) and the demo's first search finds none of the demo's tools.
    from playground.registry import indexing

    row = indexing.schedule_index_build()  # queued on this test process's own queue, which no worker reads
    if row is not None:
        assert indexing.build_index(row.version).status == "done"


def start_conversation(page, profile: str, message: str) -> str:
    page.goto("/conversations/")
    form = "[data-testid=new-conversation-form]"
    page.select_option(f"{form} [name=profile]", label=profile)
    page.fill(f"{form} [name=message]", message)
    page.click(f"{form} [data-testid=start]")
    page.wait_for_selector("body[data-page=conversation] [data-testid=conversation]")
    return page.get_attribute("[data-testid=conversation]", "data-conversation")


def wait_for_prompt(page, tool: str) -> None:
    page.wait_for_selector(f"[data-testid=permission-prompt]:has-text('{tool}') [data-testid=answer-once]", timeout=60_000)
    page.wait_for_selector("[data-testid=conversation][data-status=waiting]")


def test_every_step_of_the_readme_demo_path_works_with_the_demo_agent(logged_in_page, demo_data):
    from playground.conversations.models import Event

    page = logged_in_page
    # 1. Logged in with the admin user; the registry holds the demo data; the offline agent is labelled.
    page.goto("/")
    assert page.locator("[data-testid=offline-label]").count() == 1

    # 2. A conversation with "Tool search on (native)": ToolSearch, the found tool loaded, then called.
    conversation = start_conversation(page, "Tool search on (native)", "What is the weather forecast for Paris?")
    wait_for_runs_finished(page, 1)
    kinds = event_types(page)
    assert kinds.index("toolsearch_query") < kinds.index("tool_call"), kinds
    call = Event.objects.get(conversation_id=conversation, type="tool_call").payload
    assert call["name"].startswith("mcp__weather__") and "Paris" in str(call["arguments"]), call
    turns = page.locator("[data-testid=timeline] [data-testid=turn]")
    assert turns.count() >= 2 and "discovered" in turns.nth(1).inner_text()
    screenshot(page, "readme-2-conversation")

    # 3. Compare: the form offers "Tool search off" against "Tool search on (native)" as it stands.
    page.goto("/conversations/compare/")
    assert page.locator("[name=profile_a] option:checked").inner_text() == "Tool search off"
    assert page.locator("[name=profile_b] option:checked").inner_text() == "Tool search on (native)"
    page.fill("[name=message]", "What is the weather forecast for Paris?")
    page.click("[data-testid=start-compare]")
    page.wait_for_selector("body[data-page=compare-view]")
    panels = page.locator("[data-testid=conversation]")
    left = f"#conversation-{panels.nth(0).get_attribute('data-conversation')}"
    right = f"#conversation-{panels.nth(1).get_attribute('data-conversation')}"
    wait_for_runs_finished(page, 1, left)
    wait_for_runs_finished(page, 1, right)
    page.wait_for_selector("[data-testid=token-difference][data-difference]")
    assert int(page.get_attribute("[data-testid=token-difference]", "data-difference")) > 0  # the right side sends fewer
    # Every tool in full does not fit the 200,000-token window: said on the turn and on the headline.
    assert page.locator(f"{left} [data-testid=over-window]").count() >= 1
    assert page.locator(f"{right} [data-testid=over-window]").count() == 0
    headline = page.locator("[data-testid=compare-over-window]")
    assert headline.is_visible() and "the left side sent" in headline.inner_text()
    assert "a real model would refuse this" in headline.inner_text()
    screenshot(page, "readme-3-compare")

    # 4. Inspector: queries the way a model writes them, and another backend.
    page.goto("/inspector/")
    query = page.locator("[data-testid=inspector-query]")
    for text, first in (("slack message", "mcp__slack__"), ("+weather alerts", "mcp__weather__"),
                        ("select:mcp__github__create_issue", "mcp__github__create_issue")):
        query.fill(text)
        page.wait_for_selector(f'[data-testid=inspector-results][data-state=ready][data-query="{text}"]')
        names = page.locator("[data-testid=inspector-results] [data-tool]").evaluate_all("els => els.map(e => e.dataset.tool)")
        assert names and names[0].startswith(first), (text, names[:3])
    query.fill("slack message")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="slack message"]')
    page.select_option("[data-testid=inspector-backend]", "bm25")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-backend="bm25"][data-query="slack message"]')
    assert page.locator("[data-testid=term-contribution]").count() > 0
    screenshot(page, "readme-4-inspector")

    # 5. Permissions: the shipped ask rules prompt on the conversation page; a deny rule hides the tool.
    start_conversation(page, "Tool search on (native)", PUSH)
    wait_for_prompt(page, "mcp__github__push_files")
    page.click("[data-testid=permission-prompt] [data-testid=answer-once]")
    page.wait_for_selector("[data-testid=permission-prompt][data-answered=once]")
    wait_for_runs_finished(page, 1)
    screenshot(page, "readme-5-push-files")
    start_conversation(page, "Tool search on (native)", "Write 'hello' to notes.txt")
    wait_for_prompt(page, "Write")
    page.click("[data-testid=permission-prompt] [data-testid=answer-deny]")
    wait_for_runs_finished(page, 1)

    page.goto("/permissions/")
    page.select_option("[data-testid=rule-form] [name=effect]", "deny")
    page.fill("[data-testid=rule-form] [name=pattern]", "mcp__github__push_files")
    page.click("[data-testid=add-rule]")
    page.wait_for_selector("[data-testid=rule-row][data-pattern=mcp__github__push_files][data-effect=deny]")
    denied = start_conversation(page, "Tool search on (native)", PUSH)
    wait_for_runs_finished(page, 1)
    offered = [e.payload for e in Event.objects.filter(conversation_id=denied, type__in=("turn_started", "toolsearch_query"))]
    assert offered and all("mcp__github__push_files" not in str(payload) for payload in offered)
    assert page.locator("[data-testid=permission-prompt]").count() == 0

    # 6. Evaluation: the labelled set that ships with the project, chosen by default.
    page.goto("/evaluation/")
    form = page.locator("form:has([name=toolset])")
    assert form.locator("select[name=toolset]").input_value() == "demo"
    form.locator("input[name=query_limit]").fill("10")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("[data-status=done]", timeout=180_000)
    assert page.locator("svg").count() >= 1  # the recall chart
    screenshot(page, "readme-6-evaluation")


def test_a_viewer_watches_a_live_conversation_read_only(browser, asgi_server, logged_in_page, demo_data, django_user_model):
    from django.contrib.auth.models import Group

    from playground.conversations.models import Event
    from tests.browser.conftest import live_server_password

    owner_page = logged_in_page
    conversation = start_conversation(owner_page, "Tool search on (native)", "What time is it in Tokyo?")
    wait_for_runs_finished(owner_page, 1)

    vera = django_user_model.objects.create_user("vera")
    vera.groups.add(Group.objects.get(name="viewer"))
    live_server_password(vera, "pw-vera-12345")
    context = browser.new_context(base_url=asgi_server.url, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto("/login/")
        page.fill("input[name=username]", "vera")
        page.fill("input[name=password]", "pw-vera-12345")
        page.click("button[type=submit]")
        page.wait_for_selector("body[data-page]:not([data-page=login])")
        page.click("nav >> text=Conversations")
        page.wait_for_selector(f"[data-conversation='{conversation}']")
        assert page.locator("[data-testid=new-conversation-form]").count() == 0
        page.goto(f"/conversations/{conversation}/")
        page.wait_for_selector("[data-testid=conversation][data-watch-only]")
        assert page.locator("[data-testid=watch-only]").is_visible()
        assert not page.locator("[data-testid=send-form]").is_visible()
        assert not page.locator("[data-testid=cancel]").is_visible()
        page.evaluate("window.__sameDocument = 'yes'")
        before = page.locator("[data-testid=chat] [data-testid=chat-message]").count()

        # The owner sends a message: the viewer's page follows it live, without a reload.
        owner_page.fill("[data-testid=send-form] [data-testid=message-input]", "Post a message to the Slack channel general")
        owner_page.click("[data-testid=send-form] [data-testid=send]")
        page.wait_for_function(
            "n => document.querySelectorAll('[data-testid=chat] [data-testid=chat-message]').length >= n + 2",
            arg=before, timeout=60_000)
        wait_for_runs_finished(page, 2)
        assert page.evaluate("window.__sameDocument") == "yes"
        screenshot(page, "viewer-watching")
        # The viewer sent nothing: the conversation holds the owner's two messages only.
        assert Event.objects.filter(conversation_id=conversation, type="message", payload__role="user").count() == 2
    finally:
        context.close()
