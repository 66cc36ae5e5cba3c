"""The deprecated HTTP+SSE transport (2024-11-05), for old servers: the demo server served with
`--sse` is registered from the form, synced, called, and marked deprecated on its pages."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import call_server_tool
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.transports import ServerConfig
from tests.mcp_servers.conftest import HttpDemoServer


@pytest.fixture(scope="module")
def sse_demo_server():
    server = HttpDemoServer(sse=True)
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_an_sse_server_is_registered_synced_called_and_marked_deprecated(admin_client, sse_demo_server, monkeypatch):
    monkeypatch.setattr(services, "request_sync", lambda server: None)  # synced below, in this test
    form = admin_client.get(reverse("mcp_servers:server_create")).content.decode()
    assert 'value="sse"' in form and "SSE (deprecated)" in form
    response = admin_client.post(reverse("mcp_servers:server_create"), {
        "name": "old-sse", "transport": "sse", "url": sse_demo_server.url, "protocol_era": "legacy", "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    server = McpServer.objects.get(name="old-sse")
    assert server.transport == "sse"

    result = services.sync_server(server)
    assert result.ok, result.error
    assert server.tools.filter(name="mcp__old-sse__add").exists()
    config = ServerConfig.from_server(server)
    assert config.describe_briefly() == "SSE (deprecated): http://127.0.0.1:" + str(sse_demo_server.port) + "/********"
    answer = call_server_tool(config, "add", {"a": 20, "b": 22})
    assert not answer.is_error and answer.content[0]["text"] == "42.0"

    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="sse-deprecated"' in page and "SSE (deprecated)" in page


@pytest.mark.django_db
def test_an_sse_server_without_a_url_is_refused_by_the_form(admin_client):
    response = admin_client.post(reverse("mcp_servers:server_create"), {"name": "no-url", "transport": "sse", "protocol_era": "legacy"})
    assert response.status_code == 200 and "An SSE (deprecated) server needs a URL." in response.content.decode()
    assert not McpServer.objects.filter(name="no-url").exists()
