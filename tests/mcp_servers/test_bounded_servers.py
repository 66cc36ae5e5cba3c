"""A server cannot flood the registry or its pages: the tools per server, description and schema
sizes a sync stores are bounded (settings), a partial listing says so, and a server's page shows its
tools a page at a time with schemas cut, whatever their number."""
from __future__ import annotations

import sys

import pytest
from django.urls import reverse

from playground.mcp_servers.models import McpServer
from playground.mcp_servers.services import sync_server
from playground.registry.models import Tool
from tests.mcp_servers.conftest import DEMO_ARGS

pytestmark = pytest.mark.django_db


def test_a_flooding_server_is_stored_bounded_and_says_so(settings, admin_client):
    settings.MCP_MAX_TOOLS_PER_SERVER = 60
    settings.MCP_MAX_TOOL_DESCRIPTION_CHARS = 8000
    settings.MCP_MAX_TOOL_SCHEMA_CHARS = 64_000
    server = McpServer.objects.create(name="flood", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                                      env={"DEMO_SERVER_FLOOD": "300"})
    result = sync_server(server)
    assert result.ok, result.error
    offered = 300 + 15  # the flood and the demo's own tools
    assert result.partial == (f"Partial listing: the server offers {offered} tools; only the first 60 are stored "
                              "(MCP_MAX_TOOLS_PER_SERVER).")
    stored = Tool.objects.filter(server=server)
    assert stored.count() == 59  # 60 kept, one of them left out for its schema
    assert not stored.filter(name="mcp__flood__flood_00002").exists()
    longest = max(len(d) for d in stored.values_list("description", flat=True))
    assert longest < 8200
    cut = stored.get(name="mcp__flood__flood_00000").description
    assert cut.endswith("over MCP_MAX_TOOL_DESCRIPTION_CHARS]") and "1,000,025 characters" in cut
    server.refresh_from_db()
    assert server.sync_warnings[0] == result.partial
    assert any("flood_00002" in w and "MCP_MAX_TOOL_SCHEMA_CHARS" in w for w in server.sync_warnings)
    assert any("2 tool description(s) cut to 8,000" in w for w in server.sync_warnings)

    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="partial-listing"' in page and f"offers {offered} tools" in page


def test_a_server_of_ten_thousand_tools_shows_a_bounded_page(admin_client, viewer_client):
    server = McpServer.objects.create(name="huge", transport="stdio", command="true", status="connected")
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "z" * 200} for i in range(100)}}
    Tool.objects.bulk_create([
        Tool(name=f"mcp__huge__tool_{i:05d}", server=server, server_name="huge", source=Tool.Source.MCP,
             description=f"Tool {i}. " + "d" * 2000, input_schema=schema, should_defer=True)
        for i in range(10_000)
    ], batch_size=1000)
    url = reverse("mcp_servers:server_detail", args=[server.pk])
    first = admin_client.get(url)
    body = first.content.decode()
    assert first.status_code == 200 and len(first.content) <= 1_000_000, len(first.content)
    assert "Tools (10000)" in body and body.count('data-testid="tool-row"') == 25
    assert "page 1 of 400" in body and body.count('data-testid="tool-body-deferred"') == 25
    opened = admin_client.get(reverse("mcp_servers:tool_body", args=[server.pk, Tool.objects.get(name="mcp__huge__tool_00000").pk]))
    assert opened.status_code == 200 and 'data-testid="call-form"' in opened.content.decode() and "p99" in opened.content.decode()
    last = admin_client.get(url + "?tools_page=400").content.decode()
    assert "mcp__huge__tool_09999" in last and "mcp__huge__tool_00000" not in last
    fragment = admin_client.get(reverse("mcp_servers:server_tools", args=[server.pk]) + "?tools_page=2")
    assert "mcp__huge__tool_00025" in fragment.content.decode() and len(fragment.content) <= 1_000_000
    assert admin_client.get(url + "?tools_page=nonsense").status_code == 200  # the first page, not an error

    assert len(viewer_client.get(url).content) <= 1_000_000
