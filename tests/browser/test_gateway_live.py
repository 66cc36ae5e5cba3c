"""A gateway session watched live in a real browser: an MCP client (the SDK, streamable HTTP) lists,
searches and calls through the live server while the session's page is open, and the search (with
its scores) and the call appear over the page's WebSocket with no reload; a reload shows the same."""
from __future__ import annotations

import json
import threading

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
STEP_TIMEOUT_SECONDS = 30


def served_profile():
    from playground.gateway.tokens import issue_token
    from playground.registry import adapter
    from playground.registry.models import AgentProfile, Tool

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    Tool.objects.create(name="echo", description="Echo the given text back.", source=Tool.Source.BUILTIN, input_schema=schema)
    Tool.objects.create(name="word_count", description="Count the words in a text.", source=Tool.Source.BUILTIN,
                        should_defer=True, input_schema=schema)
    Tool.objects.create(name="mcp__weather__get_forecast", description="Weather forecast for a city, by day.",
                        server_name="weather",
                        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    profile = AgentProfile.objects.create(name="Served in the browser test", tool_search_mode="true",
                                          search_backend="claude-code")
    adapter.reset_caches()
    _, token = issue_token(profile, "browser test client")
    return profile, token


class Client(threading.Thread):
    """The SDK client in its own thread (Playwright's sync API owns this one's event loop). It
    initializes, then waits for the page to be watching before it lists, searches and calls."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.token = url, token
        self.initialized, self.go, self.done = threading.Event(), threading.Event(), threading.Event()
        self.results: dict = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            anyio.run(self.flow)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
        finally:
            self.initialized.set()
            self.done.set()

    async def flow(self) -> None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"}) as http:
            async with streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(read, write, client_info=types.Implementation(name="browser-watched-client",
                                                                                      version="1.2")) as session:
                    await session.initialize()
                    self.initialized.set()
                    await anyio.to_thread.run_sync(self.go.wait, STEP_TIMEOUT_SECONDS)
                    self.results["listed"] = [t.name for t in (await session.list_tools()).tools]
                    found = await session.call_tool("ToolSearch", {"query": "count words"})
                    self.results["found"] = json.loads(found.content[0].text)["matches"]
                    called = await session.call_tool("word_count", {"text": "one two three four"})
                    self.results["called"] = (called.is_error, called.content[0].text)


def test_a_gateway_session_streams_live_to_its_page(logged_in_page, asgi_server):
    from playground.gateway.models import GatewaySession

    profile, token = served_profile()
    client = Client(f"{asgi_server.url}/gateway/mcp/{profile.pk}/", token)
    client.start()
    assert client.initialized.wait(STEP_TIMEOUT_SECONDS) and client.error is None, client.error
    session = GatewaySession.objects.get(profile=profile)

    page = logged_in_page
    page.goto(f"/gateway/sessions/{session.pk}/")
    page.wait_for_selector("[data-testid=gateway-session][data-socket=open]")
    page.evaluate("window.__sameDocument = 'yes'")
    events = "[data-testid=gateway-events] [data-testid=gateway-event]"
    assert page.locator(events).count() == 1  # session_started, saved before the page loaded

    client.go.set()
    page.wait_for_selector(f"{events}[data-type=tool_call]", timeout=STEP_TIMEOUT_SECONDS * 1000)
    assert client.done.wait(STEP_TIMEOUT_SECONDS) and client.error is None, client.error
    assert client.results["found"] and "word_count" in client.results["found"]
    assert client.results["called"][0] is False and "4" in client.results["called"][1]

    assert page.evaluate("window.__sameDocument") == "yes"  # no reload: it came over the socket
    live_types = page.locator(events).evaluate_all("els => els.map(e => e.dataset.type)")
    assert live_types[:4] == ["session_started", "tools_listed", "tool_search", "tool_call"], live_types
    search = page.locator(f"{events}[data-type=tool_search]")
    assert "count words" in search.inner_text()
    scores = search.locator("tbody tr")
    assert scores.count() >= 1 and "word_count" in scores.first.inner_text()
    assert float(scores.first.locator("td").nth(1).inner_text()) > 0
    call = page.locator(f"{events}[data-type=tool_call]")
    assert "word_count" in call.inner_text() and "one two three four" in call.inner_text()
    assert "word_count" in page.locator("[data-testid=gateway-discovered]").inner_text()
    screenshot(page, "gateway-session-live")

    sequences = page.locator(events).evaluate_all("els => els.map(e => e.dataset.sequence)")
    page.reload()
    page.wait_for_selector("[data-testid=gateway-session][data-socket=open]")
    assert page.locator(events).evaluate_all("els => els.map(e => e.dataset.sequence)")[:len(sequences)] == sequences
    assert len(set(page.locator(events).evaluate_all("els => els.map(e => e.dataset.sequence)"))) == page.locator(events).count()


class ConfirmingClient(Client):
    """A client that opens a session per request: one session searches, the next (watched) calls what
    the first found, and answers the gateway's question about an `ask` call itself (elicitation)."""

    async def flow(self) -> None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"}) as http:
            async with streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(read, write, client_info=types.Implementation(name="one-shot", version="1")) as first:
                    await first.initialize()
                    await first.call_tool("ToolSearch", {"query": "select:word_count"})

            async def confirm(context, params):
                self.results["asked"] = params.message
                return types.ElicitResult(action="accept", content={})

            async with streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(read, write, elicitation_callback=confirm,
                                         client_info=types.Implementation(name="one-shot", version="1")) as second:
                    await second.initialize()
                    self.initialized.set()
                    await anyio.to_thread.run_sync(self.go.wait, STEP_TIMEOUT_SECONDS)
                    called = await second.call_tool("word_count", {"text": "one two three four"})
                    self.results["called"] = (called.is_error, called.content[0].text)


def test_a_one_shot_client_confirms_an_ask_call_itself_and_the_page_shows_it(logged_in_page, asgi_server):
    from playground.gateway.models import GatewaySession
    from playground.registry.models import PermissionRule

    profile, token = served_profile()
    PermissionRule.objects.create(effect="ask", pattern="word_count", profile=profile)
    client = ConfirmingClient(f"{asgi_server.url}/gateway/mcp/{profile.pk}/", token)
    client.start()
    assert client.initialized.wait(STEP_TIMEOUT_SECONDS) and client.error is None, client.error
    session = GatewaySession.objects.filter(profile=profile).order_by("pk").last()
    assert session.discovered_tools == ["word_count"]  # found by the first session, remembered

    page = logged_in_page
    page.goto(f"/gateway/sessions/{session.pk}/")
    page.wait_for_selector("[data-testid=gateway-session][data-socket=open]")
    events = "[data-testid=gateway-events] [data-testid=gateway-event]"
    assert "earlier sessions" in page.locator(f"{events}[data-type=session_started]").inner_text()
    client.go.set()
    page.wait_for_selector(f"{events}[data-type=tool_call]", timeout=STEP_TIMEOUT_SECONDS * 1000)
    assert client.done.wait(STEP_TIMEOUT_SECONDS) and client.error is None, client.error
    assert client.results["called"][0] is False and "4" in client.results["called"][1]
    assert "word_count" in client.results["asked"]
    assert "asked to confirm too" in page.locator(f"{events}[data-type=permission_asked]").inner_text()
    assert "by the person at the MCP client" in page.locator(f"{events}[data-type=permission_answered]").inner_text()
    assert "Approve once" not in page.locator("[data-testid=gateway-events]").inner_text()  # answered: buttons gone
    screenshot(page, "gateway-session-elicitation")
