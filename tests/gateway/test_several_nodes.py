"""Two web processes on one database, as two nodes behind a balancer without sticky routing: a
session opened on one is taken over by the other from what the database holds (its handshake and
discovered tools), for the same token only, and a session the client closed is served by neither."""
from __future__ import annotations

import json

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.test_live_client import raw_request, text_of, wait_for_event

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class Balancer(httpx2.AsyncBaseTransport):
    """Sends each request to whichever node `port` names (None: where the URL says)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.port: int | None = None

    async def handle_async_request(self, request):
        if self.port is not None:
            request.url = request.url.copy_with(port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_session_moves_to_another_node_with_its_discovered_tools(live_gateway, second_gateway, gateway_world):
    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]
    balancer = Balancer()

    async def flow():
        async with httpx2.AsyncClient(transport=balancer, headers={"Authorization": f"Bearer {token}"},
                                      timeout=httpx2.Timeout(30, read=300)) as http:
            async with streamable_http_client(live_gateway.endpoint(profile.pk), http_client=http) as (read, write):
                async with ClientSession(read, write, client_info=types.Implementation(name="roaming-client", version="3")) as session:
                    await session.initialize()
                    found = await session.call_tool("ToolSearch", {"query": "select:calculator"})
                    assert json.loads(found.content[0].text)["matches"] == ["calculator"]
                    balancer.port = port_of(second_gateway.url)  # every later request reaches node B
                    listed = [t.name for t in (await session.list_tools()).tools]
                    called = await session.call_tool("calculator", {"expression": "2+3"})
                    early = await session.call_tool("word_count", {"text": "a b"})
                    return listed, called, early

    listed, called, early = anyio.run(flow)
    assert "calculator" in listed and "word_count" not in listed
    assert not called.is_error and "5" in text_of(called)
    assert early.is_error and "select:word_count" in text_of(early)  # B knows what was not discovered too

    session = GatewaySession.objects.get(profile=profile)
    wait_for_event(session, "session_closed")  # the client's DELETE, served by node B
    assert "resumed session" in second_gateway.logs() and session.session_id[:8] in second_gateway.logs()
    assert "resumed session" not in live_gateway.logs()
    session.refresh_from_db()
    assert session.closed_at is not None and session.negotiated_version and session.initialize_params["clientInfo"]["name"] == "roaming-client"
    kinds = list(session.events.order_by("sequence").values_list("type", flat=True))
    assert kinds[0] == "session_started" and kinds.count("session_started") == 1 and kinds[-1] == "session_closed"
    assert [e.payload["name"] for e in session.events.filter(type="tool_call").order_by("sequence")] == ["calculator", "word_count"]

    # Closed: node A (still holding the session in memory) refuses to serve it, node B does not resume it.
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session.session_id, "MCP-Protocol-Version": session.negotiated_version}
    status, messages = raw_request(live_gateway.endpoint(profile.pk), headers, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    if status == 200:
        assert "closed" in next(m for m in messages if m.get("id") == 3)["error"]["message"]
    else:
        assert status == 404
    assert raw_request(second_gateway.endpoint(profile.pk), headers, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})[0] == 404


def test_only_the_token_that_opened_a_session_can_resume_it_elsewhere(live_gateway, second_gateway, gateway_world):
    from playground.gateway.models import GatewaySession
    from playground.gateway.tokens import issue_token

    profile, token = gateway_world["profile"], gateway_world["token"]
    url_a = live_gateway.endpoint(profile.pk)

    async def open_and_leave():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url_a, http_client=http, terminate_on_close=False) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("ToolSearch", {"query": "select:word_count"})

    anyio.run(open_and_leave)
    session = GatewaySession.objects.get(profile=profile)
    headers = {"Mcp-Session-Id": session.session_id, "MCP-Protocol-Version": session.negotiated_version}
    _, second = issue_token(profile, "another client")
    url_b = second_gateway.endpoint(profile.pk)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert raw_request(url_b, {**headers, "Authorization": f"Bearer {second}"}, message)[0] == 404
    status, messages = raw_request(url_b, {**headers, "Authorization": f"Bearer {token}"}, message)
    assert status == 200
    assert "word_count" in [t["name"] for t in next(m for m in messages if m.get("id") == 1)["result"]["tools"]]
