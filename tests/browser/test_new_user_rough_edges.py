"""What a new user hit at 1280×800 (issue 46): the permissions page wider than the window with tool
names broken mid-word, the inspector's results under the fold, "Save as task" looking disabled."""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_NAMES = ("mcp__github_enterprise__create_pull_request_review_comment",
              "mcp__filesystem__delete_directory_recursively", "mcp__google_workspace__search_drive_files")


def seed_permissions():
    from playground.registry.models import AgentProfile, PermissionRule, Tool

    profile = AgentProfile.objects.create(name="a-rather-long-profile-name-for-review")
    for name in LONG_NAMES:
        Tool.objects.create(name=name, description="A tool with a long name", input_schema={"type": "object", "properties": {}},
                            server_name=name.split("__")[1], source=Tool.Source.IMPORTED)
    PermissionRule.objects.create(effect="ask", pattern=LONG_NAMES[0], profile=profile,
                                  note="ask before writing anything to the company's GitHub, please")
    PermissionRule.objects.create(effect="deny", pattern=LONG_NAMES[1], note="never")
    PermissionRule.objects.create(effect="deny", pattern="mcp__google_workspace__*", note="not here")


def test_the_permissions_page_fits_1280_and_breaks_tool_names_between_words(logged_in_page):
    from django.core.management import call_command

    call_command("load_demo_data")
    seed_permissions()
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/permissions/")
    page.wait_for_selector("[data-testid=rules-table]")
    # The preview ("what the model sees", its prompt-cache table included) arrives after the page: wait for it.
    page.wait_for_selector("#permissions-preview [data-testid=model-view-cache] table")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    # Each line of a wrapped pattern ends where the name has a break (after "_", "-", "*"), never mid-word.
    lines = page.locator("[data-testid=rule-row] td.mono").evaluate_all("""cells => cells.map(cell => {
        const text = cell.textContent, range = document.createRange(), node = cell.firstChild, ends = [];
        let top = null;
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        let seen = 0;
        for (let t = walker.nextNode(); t; t = walker.nextNode()) {
          for (let i = 0; i < t.length; i++) {
            range.setStart(t, i); range.setEnd(t, i + 1);
            const y = Math.round(range.getBoundingClientRect().top);
            if (top !== null && y > top) ends.push(text[seen + i - 1]);
            top = y;
          }
          seen += t.length;
        }
        return {text, ends};
    })""")
    wrapped = [line for line in lines if line["ends"]]
    assert wrapped, lines  # the long names do wrap in the narrow column …
    for line in wrapped:
        assert all(end in "_-*./" for end in line["ends"]), line  # … between their words
    screenshot(page, "permissions-1280-word-breaks")


def test_the_inspectors_matches_start_above_the_fold(logged_in_page):
    from django.core.management import call_command

    call_command("load_demo_data")
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/inspector/?q=slack+message")
    page.wait_for_selector("[data-testid=scored-tool]")
    first = page.locator("[data-testid=scored-tool]").first.bounding_box()
    assert first["y"] + 40 < 800, first  # the first match and its score are in the window
    settings = page.locator("[data-testid=inspector-settings-help]")
    assert settings.evaluate("d => d.tagName") == "DETAILS" and not settings.evaluate("d => d.open")
    screenshot(page, "inspector-1280-above-the-fold")


def test_save_as_task_looks_like_a_link_not_a_disabled_button(logged_in_page, admin_user):
    from playground.conversations import services
    from playground.conversations.events import ChatMessage, record_event

    conversation = services.start_conversation(admin_user)
    record_event(conversation, ChatMessage(role="user", text="hi"), status="idle")
    page = logged_in_page
    page.goto(f"/conversations/{conversation.pk}/")
    button = page.locator("[data-testid=save-as-task] button")
    link = page.locator("[data-testid=export-link]")
    assert button.evaluate("b => getComputedStyle(b).color") == link.evaluate("a => getComputedStyle(a).color")
    assert button.is_enabled() and button.evaluate("b => getComputedStyle(b).cursor") == "pointer"
    logout = page.locator(".topbar button.link")
    assert logout.evaluate("b => getComputedStyle(b).color") == "rgb(203, 213, 225)"  # the dark bar keeps its light link


def test_ticking_compare_boxes_quickly_logs_no_console_error(logged_in_page):
    from django.core.management import call_command

    call_command("load_demo_data")
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/inspector/?q=slack+message")
    page.wait_for_selector("[data-testid=scored-tool]")
    boxes = page.locator("[data-testid=compare-backend]:not([disabled])")
    for _ in range(3):
        for i in range(boxes.count()):
            boxes.nth(i).click(delay=0)
    page.wait_for_selector("[data-testid=inspector-results][data-state]")
    page.wait_for_load_state("networkidle")
    assert errors == [], errors


def test_the_admins_top_bar_is_one_line_at_1280(logged_in_page):
    """Every link an admin has (the most of any role), the offline label and the prompt count in one row."""
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/conversations/")
    bar = page.locator("header.topbar")
    links = page.locator("header.topbar nav a")
    tops = {round(box["y"]) for box in (links.nth(i).bounding_box() for i in range(links.count()))}
    widths = page.evaluate("() => [document.querySelector('header.topbar nav').clientWidth, [...document.querySelectorAll('header.topbar nav a')].reduce((s, a) => s + a.getBoundingClientRect().width + 5, 0), document.querySelector('header.topbar .who').getBoundingClientRect().width, document.querySelector('header.topbar .brand').getBoundingClientRect().width]")
    assert links.count() >= 13 and len(tops) == 1, f"the links sit on {len(tops)} rows: {widths}"
    assert bar.bounding_box()["height"] < 40
