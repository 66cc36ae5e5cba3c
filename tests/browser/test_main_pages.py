"""Every page in the navigation renders in the browser for an admin; a screenshot of each.

The main pages reached past the navigation have theirs in the tests of their flows: the dashboard
(home), the server workbench (mcp-workbench), the conversation (conversation-live), compare, the
evaluation run (ux-evaluation-done) and a gateway session (gateway-session-live)."""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_registry_pages import seed_catalog

NAV_PAGES = [
    ("Tools", "tool-list"),
    ("MCP servers", "mcp-server-list"),
    ("Inspector", "inspector"),
    ("What the model sees", "model-view"),
    ("Permissions", "permissions"),
    ("Profiles", "profile-list"),
    ("Conversations", "conversations"),
    ("Usage", "overview"),
    ("Evaluation", "evaluation"),
    ("Gateway", "gateway-sessions"),
    ("Users", "users"),
]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize(("link", "page_id"), NAV_PAGES, ids=[p[0] for p in NAV_PAGES])
def test_nav_page_renders(logged_in_page, link, page_id):
    seed_catalog()
    page = logged_in_page
    console_errors: list[str] = []  # a script or style that fails to load is logged here
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    with page.expect_navigation() as navigation:
        page.click(f"header nav >> text='{link}'")
    response = navigation.value
    assert response is not None and response.status == 200, f"{link}: HTTP {response and response.status}"
    body = page.wait_for_selector("body[data-page]")
    if page_id is not None:
        assert body.get_attribute("data-page") == page_id
    assert page.locator("header nav").count() == 1
    page.wait_for_load_state("networkidle")
    assert console_errors == [], f"{link}: {console_errors}"
    screenshot(page, "page-" + link.lower().replace(" ", "-"))


def test_an_admins_navigation_fits_one_line_at_1280_px(logged_in_page):
    # Every link an admin gets (Gateway and Users included) beside the user block, on one line.
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/tools/")
    assert page.locator("header nav a").all_inner_texts()[-2:] == ["Gateway", "Users"]
    box = page.evaluate("""() => {
        const rect = s => document.querySelector(s).getBoundingClientRect();
        const links = [...document.querySelectorAll('header nav a')].map(a => a.getBoundingClientRect());
        return {nav: rect('header nav').height, link: Math.max(...links.map(r => r.height)),
                tops: [...new Set(links.map(r => Math.round(r.top)))], brand: rect('header .brand'), who: rect('header .who'),
                lastRight: Math.max(...links.map(r => r.right)), width: document.documentElement.clientWidth};
    }""")
    assert box["nav"] == box["link"] and len(box["tops"]) == 1, box  # the nav is one line of links
    assert abs(box["who"]["top"] - box["brand"]["top"]) < 8 and box["lastRight"] <= box["who"]["left"], box  # the user block beside it
    assert box["who"]["right"] <= box["width"], box
    # The offline stand-in stays labelled, with the reason on hover.
    label = page.locator("header [data-testid=offline-label]")
    assert label.inner_text() == "offline demo" and "offline demo agent" in label.get_attribute("title")
