"""In Chromium against the live server: trying a server without registering it (list, call,
then Register through the server form), and the new server's Protocol view after its first sync."""
from __future__ import annotations

import sys

from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool
from tests.browser.conftest import doc_screenshot, screenshot


def test_try_a_server_then_register_it_and_read_its_protocol(logged_in_page):
    page = logged_in_page
    page.goto("/mcp/")
    page.click("[data-testid=try-server]")
    page.wait_for_selector("body[data-page=mcp-server-try]")
    page.select_option("[name=transport]", "stdio")
    page.fill("[name=command]", sys.executable)
    page.fill("[name=args_text]", "-m\nplayground.mcp_servers.demo_server")
    page.select_option("[name=protocol_era]", "2026-07-28")
    page.click("[data-testid=scratch-list]")
    page.wait_for_selector("[data-testid=scratch-tool][data-tool=echo]", timeout=30_000)
    assert "MCP 2026-07-28" in page.locator("[data-testid=scratch-server]").inner_text()
    assert not McpServer.objects.exists() and not Tool.objects.filter(name__startswith="mcp__").exists()

    echo = page.locator("[data-testid=scratch-tool][data-tool=echo]")
    echo.locator("summary").click()
    echo.locator("[data-testid=scratch-arguments]").fill('{"text": "hello scratch"}')
    echo.locator("[data-testid=scratch-call]").click()
    outcome = echo.locator("[data-testid=scratch-outcome]")
    outcome.wait_for(timeout=30_000)
    assert "hello scratch" in outcome.inner_text()
    screenshot(page, "mcp-try-a-server")
    doc_screenshot(page, "mcp-try-a-server", scroll_to="h1")
    assert not McpServer.objects.exists()

    page.fill("[name=name]", "tried")
    page.click("[data-testid=scratch-register]")
    page.wait_for_selector("body[data-page=mcp-server-detail]")
    page.wait_for_selector("[data-testid=server-status][data-status=connected]", timeout=60_000)
    server = McpServer.objects.get(name="tried")
    assert server.protocol_era == "2026-07-28"

    page.click("[data-testid=protocol-link]")
    page.wait_for_selector("body[data-page=mcp-protocol]")
    assert page.locator("[data-testid=protocol-message][data-kind=request]", has_text="server/discover").count() >= 1
    assert page.locator("[data-testid=protocol-message][data-kind=response]", has_text="tools/list").count() >= 1
    assert "2026-07-28 stateless" in page.locator("[data-testid=protocol-era]").first.inner_text()
    page.locator("[data-testid=protocol-message]", has_text="tools/list").last.locator("summary").click()
    screenshot(page, "mcp-protocol-view")
    doc_screenshot(page, "mcp-protocol-view")
