"""OAuth Connect in Chromium against the live server: a server behind a local authorization server
(tests/mcp_servers/oauth_doubles.py) is added through the form; its first sync meets a 401, the page
offers Connect; Connect sends the browser to the authorization server, which approves and sends it
back to our callback; the page says "Connected as …" and the server syncs its tools with the token."""
from __future__ import annotations

import pytest

from playground.mcp_servers.models import McpServer
from tests.browser.conftest import doc_screenshot, screenshot
from tests.mcp_servers.oauth_doubles import OAuthProtectedServer


@pytest.fixture
def protected():
    server = OAuthProtectedServer()
    yield server
    server.stop()


def test_connect_signs_in_at_the_authorization_server_and_comes_back_connected(logged_in_page, protected):
    page = logged_in_page
    page.goto("/mcp/new/")
    page.wait_for_selector("body[data-page=mcp-server-form]")
    page.fill("[name=name]", "hosted")
    page.select_option("[name=transport]", "http")
    page.fill("[name=url]", protected.url)
    page.select_option("[name=protocol_era]", "legacy")
    page.click("[data-testid=save-server]")
    page.wait_for_selector("body[data-page=mcp-server-detail]")

    # The first sync meets the 401: the page offers Connect instead of an error.
    page.wait_for_selector("[data-testid=needs-sign-in]", timeout=60_000)
    page.reload()
    page.wait_for_selector("[data-testid=oauth-connect]")
    screenshot(page, "mcp-oauth-needs-connect")

    page.click("[data-testid=oauth-connect]")  # → /authorize (approves) → our callback → the server's page
    page.wait_for_selector("[data-testid=oauth-connected]", timeout=60_000)
    assert "Connected as an account at 127.0.0.1" in page.locator("[data-testid=oauth-connected]").inner_text()
    assert protected.auth.counts["register"] == 1 and protected.auth.counts["code"] == 1

    # The sync Connect queued uses the token: status and tools follow without a reload.
    page.wait_for_selector("[data-testid=server-status][data-status=connected]", timeout=60_000)
    server = McpServer.objects.get(name="hosted")
    assert server.tools.filter(name="mcp__hosted__add").exists() and protected.auth.counts["mcp_ok"] > 0
    token = next(iter(protected.auth.access_tokens))
    assert token not in page.content() and page.locator("[data-testid=oauth-token]").inner_text().startswith("********")
    screenshot(page, "mcp-oauth-connected")
    doc_screenshot(page, "mcp-oauth-connected", scroll_to="[data-testid=oauth-card]")
