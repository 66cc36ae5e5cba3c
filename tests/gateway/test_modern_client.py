"""2026-07-28 (stateless) clients against the gateway served by Daphne: the SDK's own `Client`
pinned to the version, with no handshake and no session; and the same flows with mode="legacy"."""
from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.gateway.test_live_client import raw_request
from tests.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODERN = "2026-07-28"


def names(result) -> list[str]:
    return [t.name for t in result.tools]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def run_client(url: str, token: str, mode: str, name: str, flow):
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          client_info=types.Implementation(name=name, version="1.0")) as client:
            return await flow(client)


@pytest.mark.parametrize("mode", [MODERN, "legacy", "auto"])
def test_a_client_of_either_era_searches_and_a_new_client_of_the_same_name_calls_what_it_found(
        live_gateway, gateway_world, mode):
    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)

    async def search(client):
        assert client.protocol_version == (MODERN if mode != "legacy" else client.protocol_version)
        first = await client.list_tools()
        listed = names(first)
        assert listed[0] == "echo" and listed[-2:] == ["ToolSearch", "CallDiscoveredTool"]
        assert "word_count" not in listed
        found = await client.call_tool("ToolSearch", {"query": "select:word_count"})
        assert not found.is_error, text_of(found)
        assert json.loads(found.content[0].text)["matches"] == ["word_count"]
        return first

    first = anyio.run(run_client, url, token, mode, "script-a", search)
    if mode != "legacy":
        assert first.ttl_ms == 0 and first.cache_scope == "private"  # any search may change it

    async def call(client):
        listed = names(await client.list_tools())
        assert "word_count" in listed, listed
        assert listed.index("word_count") > listed.index("ToolSearch")  # found tools come after the prefix
        counted = await client.call_tool("word_count", {"text": "one two three"})
        assert not counted.is_error and "3" in text_of(counted)
        return listed

    again = anyio.run(run_client, url, token, mode, "script-a", call)
    assert again == anyio.run(run_client, url, token, mode, "script-a", call)  # the same order every time

    async def other_name(client):
        return names(await client.list_tools())

    assert "word_count" not in anyio.run(run_client, url, token, mode, "script-b", other_name)

    rows = GatewaySession.objects.filter(profile=profile, client_name="script-a")
    if mode == "legacy":
        assert rows.count() == 3 and not rows.filter(stateless=True).exists()
    else:
        # The stateless requests of one token and client name gather in one row, the session's stand-in.
        row = rows.get()
        assert row.stateless and row.protocol_version == MODERN and row.discovered_tools == ["word_count"]
        kinds = list(row.events.order_by("sequence").values_list("type", flat=True))
        assert kinds[0] == "session_started" and kinds.count("tool_call") == 2 and "tool_search" in kinds


def test_server_discover_and_a_raw_stateless_request(live_gateway, gateway_world):
    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "8"}}
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": MODERN}
    status, messages = raw_request(url, {**headers, "Mcp-Method": "server/discover"},
                                   {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    assert status == 200, messages
    result = messages[0]["result"]
    assert MODERN in result["supportedVersions"]
    assert result["capabilities"]["tools"]["listChanged"] is True  # announced on subscriptions/listen
    assert "ToolSearch" in result["instructions"]

    status, messages = raw_request(url, {**headers, "Mcp-Method": "tools/list"},
                                   {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}})
    assert status == 200 and "Mcp-Session-Id" not in json.dumps(messages)
    assert [t["name"] for t in messages[0]["result"]["tools"]][-1] == "CallDiscoveredTool"
    # No token: refused before the SDK sees it, as for every era.
    status, _ = raw_request(url, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
                            {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}})
    assert status == 401


def test_a_listen_stream_hears_that_a_search_of_the_same_client_added_tools(live_gateway, gateway_world):
    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)

    async def flow(client):
        async with client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed is True
            assert not subscription.honored.prompts_list_changed  # the gateway announces tool lists only
            # Another client of the same token and name searches (another connection, maybe another process).
            await run_client(url, token, MODERN, "listener", lambda other: other.call_tool(
                "ToolSearch", {"query": "select:calculator"}))
            with anyio.fail_after(10):
                async for event in subscription:
                    assert type(event).__name__ == "ToolsListChanged"
                    break
        return names(await client.list_tools())

    listed = anyio.run(run_client, url, token, MODERN, "listener", flow)
    assert "calculator" in listed


def test_a_stateless_client_idle_past_the_timeout_starts_a_new_row_with_what_it_found(live_gateway, gateway_world):
    from django.utils import timezone

    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    anyio.run(run_client, url, token, MODERN, "sleepy",
              lambda client: client.call_tool("ToolSearch", {"query": "select:calculator"}))
    old = GatewaySession.objects.get(client_name="sleepy")
    GatewaySession.objects.filter(pk=old.pk).update(last_seen_at=timezone.now() - timezone.timedelta(hours=2))

    async def listed(client):
        return names(await client.list_tools())

    assert "calculator" in anyio.run(run_client, url, token, MODERN, "sleepy", listed)  # remembered
    rows = GatewaySession.objects.filter(client_name="sleepy").order_by("pk")
    assert rows.count() == 2
    wait_until(lambda: rows.first().closed_at is not None, "the idle row closed")
    assert rows.last().discovered_tools == ["calculator"] and rows.last().closed_at is None


def test_a_stateless_clients_later_requests_find_its_row_with_a_plain_read(gateway_world):
    """Only a client's first request takes the token's row lock (two first requests make one row);
    its later ones read the stored per-client row with a plain query, in no transaction, and get
    the same row with what the client found meanwhile."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from playground.gateway import server, service
    from playground.gateway.models import GatewaySession

    profile, token_row = gateway_world["profile"], gateway_world["token_row"]
    info = {"profile_id": profile.pk, "token_id": token_row.pk}
    client = ("plain-reader", "1.0", MODERN)
    with CaptureQueriesContext(connection) as first_queries:
        first = server._open_session(server.STATELESS, info, client)
    assert first.stateless and "gateway_gatewaytoken" in " ".join(q["sql"] for q in first_queries)
    service.add_discovered(first.pk, ["word_count"])
    for _ in range(2):
        with CaptureQueriesContext(connection) as later_queries:
            later = server._open_session(server.STATELESS, info, client)
        sql = [q["sql"] for q in later_queries]
        assert later.pk == first.pk and later.discovered_tools == ["word_count"]
        assert not any("gateway_gatewaytoken" in q for q in sql), sql  # no lock on the token's row
        assert not any(q.upper().startswith(("SAVEPOINT", "BEGIN")) for q in sql), sql  # no transaction
    assert GatewaySession.objects.filter(client_name="plain-reader").count() == 1
