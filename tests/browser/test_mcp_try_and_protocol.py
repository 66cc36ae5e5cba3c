"""In Chromium against the live server: trying a server without registering it (list, call,
then Register through the server form), the new server's Protocol view after its first sync, and a
stateless gateway client's session in the same view."""
from __future__ import annotations

import sys
import threading

import pytest

from playground.mcp_servers import protocol_log
from playground.mcp_servers.models import McpProtocolMessage, McpServer
from playground.registry.models import Tool
from tests.browser.conftest import doc_screenshot, screenshot
from tests.polling import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]


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


def test_a_stateless_gateway_clients_protocol_view(logged_in_page, asgi_server):
    """A 2026-07-28 client (the SDK pinned to it) lists and searches through the live gateway; the
    session's Protocol view shows both directions, the era, and never the token."""
    import anyio

    from playground.gateway.models import GatewaySession
    from tests.browser.test_gateway_live import served_profile
    from tests.gateway.test_modern_client import MODERN, run_client

    profile, token = served_profile()

    async def flow(client):
        await client.list_tools()
        return await client.call_tool("ToolSearch", {"query": "select:word_count"})

    outcome: dict = {}

    def client_thread() -> None:  # Playwright's sync API holds this thread's event loop
        outcome["found"] = anyio.run(run_client, f"{asgi_server.url}/gateway/mcp/{profile.pk}/", token, MODERN,
                                     "protocol-browser", flow)

    worker = threading.Thread(target=client_thread)
    worker.start()
    worker.join(60)
    assert not outcome["found"].is_error
    session = GatewaySession.objects.get(client_name="protocol-browser")
    scope = protocol_log.gateway_scope(session.pk)
    wait_until(lambda: McpProtocolMessage.objects.filter(scope=scope, method="tools/call", kind="response").exists(),
               "the search's answer in the session's transcript", 20)
    page = logged_in_page
    page.goto(f"/gateway/sessions/{session.pk}/")
    page.click("[data-testid=protocol-link]")
    page.wait_for_selector("body[data-page=mcp-protocol]")
    assert page.locator("[data-testid=protocol-message][data-kind=response]", has_text="tools/call").count() == 1
    assert "2026-07-28 stateless" in page.locator("[data-testid=protocol-era]").first.inner_text()
    assert token not in page.content()
    page.locator("[data-testid=protocol-message][data-kind=response]", has_text="tools/call").locator("summary").click()
    screenshot(page, "gateway-protocol-view")
