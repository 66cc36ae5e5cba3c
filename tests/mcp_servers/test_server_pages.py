"""Server list, create, edit and detail pages: roles, validation, masking of secrets."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers.forms import SECRET_MASK
from playground.mcp_servers.models import McpServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def secret_server(db):
    return McpServer.objects.create(
        name="github", transport="http", url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer s3cret-token"}, status="failed", last_error="boom: 401",
    )


@pytest.fixture
def stdio_secret_server(db):
    return McpServer.objects.create(name="files", command="/usr/bin/env", args=["mcp-files"], env={"API_KEY": "k-123", "MODE": "ro"})


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("mcp_servers:server_list"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_list_shows_status_badges_and_the_live_socket(viewer_client, secret_server):
    html = viewer_client.get(reverse("mcp_servers:server_list")).content.decode()
    assert 'data-testid="server-row" data-server="github"' in html
    assert 'data-status="failed"' in html
    assert 'ws-connect="/ws/mcp/status/"' in html and 'hx-ext="ws"' in html
    assert "Add server" not in html  # viewers read only


def test_staff_see_the_add_button(admin_client):
    assert 'data-testid="add-server"' in admin_client.get(reverse("mcp_servers:server_list")).content.decode()


def test_viewers_cannot_create_edit_or_delete(viewer_client, secret_server):
    assert viewer_client.get(reverse("mcp_servers:server_create")).status_code == 403
    assert viewer_client.post(reverse("mcp_servers:server_create"), {"name": "x"}).status_code == 403
    assert viewer_client.get(reverse("mcp_servers:server_edit", args=[secret_server.pk])).status_code == 403
    assert viewer_client.post(reverse("mcp_servers:server_delete", args=[secret_server.pk])).status_code == 403
    assert viewer_client.post(reverse("mcp_servers:server_sync", args=[secret_server.pk])).status_code == 403
    assert viewer_client.post(reverse("mcp_servers:server_test", args=[secret_server.pk])).status_code == 403
    assert McpServer.objects.filter(pk=secret_server.pk).exists()


def test_the_detail_page_masks_secrets_and_shows_the_last_error(viewer_client, secret_server):
    html = viewer_client.get(reverse("mcp_servers:server_detail", args=[secret_server.pk])).content.decode()
    assert "s3cret-token" not in html
    assert f"Authorization: {SECRET_MASK}" in html
    assert "boom: 401" in html
    assert 'data-testid="sync-now"' not in html  # staff only


def test_the_edit_form_masks_secrets(admin_client, stdio_secret_server):
    html = admin_client.get(reverse("mcp_servers:server_edit", args=[stdio_secret_server.pk])).content.decode()
    assert "k-123" not in html and "ro\n" not in html
    assert f"API_KEY={SECRET_MASK}" in html


def test_an_unchanged_mask_keeps_the_stored_secret_and_a_new_value_replaces_it(admin_client, stdio_secret_server):
    url = reverse("mcp_servers:server_edit", args=[stdio_secret_server.pk])
    data = {
        "name": "files", "transport": "stdio", "command": "/usr/bin/env", "url": "", "enabled": "on",
        "args_text": "mcp-files", "env_text": f"API_KEY={SECRET_MASK}\nMODE=rw", "headers_text": "",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302
    stdio_secret_server.refresh_from_db()
    assert stdio_secret_server.env == {"API_KEY": "k-123", "MODE": "rw"}
    assert stdio_secret_server.status == McpServer.Status.PENDING  # the config changed: a sync is queued


def test_a_mask_for_an_unknown_key_is_an_error(admin_client, stdio_secret_server):
    url = reverse("mcp_servers:server_edit", args=[stdio_secret_server.pk])
    data = {"name": "files", "transport": "stdio", "command": "/usr/bin/env", "enabled": "on",
            "env_text": f"NEW_KEY={SECRET_MASK}", "args_text": "", "headers_text": ""}
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "NEW_KEY" in response.content.decode() and "enter a value" in response.content.decode()
    stdio_secret_server.refresh_from_db()
    assert stdio_secret_server.env == {"API_KEY": "k-123", "MODE": "ro"}


def test_headers_keep_their_masked_values(admin_client, secret_server):
    url = reverse("mcp_servers:server_edit", args=[secret_server.pk])
    data = {"name": "github", "transport": "http", "url": "https://mcp.example.com/mcp", "enabled": "on",
            "headers_text": f"Authorization: {SECRET_MASK}\nX-Team: blue", "args_text": "", "env_text": ""}
    assert admin_client.post(url, data).status_code == 302
    secret_server.refresh_from_db()
    assert secret_server.headers == {"Authorization": "Bearer s3cret-token", "X-Team": "blue"}


def test_create_validates_transport_fields_and_the_name(admin_client):
    url = reverse("mcp_servers:server_create")
    response = admin_client.post(url, {"name": "bad name!", "transport": "stdio", "command": ""})
    html = response.content.decode()
    assert response.status_code == 200
    assert "needs a command" in html and "mcp__&lt;name&gt;__ prefix" in html
    response = admin_client.post(url, {"name": "web", "transport": "http", "url": ""})
    assert "needs a URL" in response.content.decode()
    response = admin_client.post(url, {"name": "web", "transport": "stdio", "command": "x", "env_text": "NOEQUALS"})
    assert "expected environment variables as NAME=value" in response.content.decode()
    assert not McpServer.objects.exists()


def test_create_saves_and_queues_a_sync(admin_client):
    url = reverse("mcp_servers:server_create")
    response = admin_client.post(url, {"name": "demo2", "transport": "stdio", "command": "/usr/bin/python3",
                                       "args_text": "-m\nplayground.mcp_servers.demo_server", "env_text": "A=1", "enabled": "on"})
    server = McpServer.objects.get(name="demo2")
    assert response.status_code == 302 and response["Location"] == reverse("mcp_servers:server_detail", args=[server.pk])
    assert server.args == ["-m", "playground.mcp_servers.demo_server"] and server.env == {"A": "1"}
    assert server.status == McpServer.Status.PENDING


def test_staff_can_delete_a_server_and_its_tools(admin_client, secret_server):
    from playground.registry.models import Tool

    Tool.objects.create(name="mcp__github__x", server=secret_server, source="mcp")
    response = admin_client.post(reverse("mcp_servers:server_delete", args=[secret_server.pk]))
    assert response.status_code == 302
    assert not McpServer.objects.exists() and not Tool.objects.exists()


def test_the_admin_lists_servers_without_secrets(admin_client, secret_server):
    html = admin_client.get(reverse("admin:mcp_servers_mcpserver_change", args=[secret_server.pk])).content.decode()
    assert "s3cret-token" not in html
    assert admin_client.get(reverse("admin:mcp_servers_mcpserver_changelist")).status_code == 200


def test_disabling_and_re_enabling_a_server_updates_its_status(admin_client, stdio_secret_server):
    url = reverse("mcp_servers:server_edit", args=[stdio_secret_server.pk])
    data = {"name": "files", "transport": "stdio", "command": "/usr/bin/env", "args_text": "mcp-files",
            "env_text": f"API_KEY={SECRET_MASK}\nMODE={SECRET_MASK}", "headers_text": ""}
    assert admin_client.post(url, data).status_code == 302  # "enabled" unchecked
    stdio_secret_server.refresh_from_db()
    assert (stdio_secret_server.enabled, stdio_secret_server.status) == (False, McpServer.Status.DISABLED)
    assert stdio_secret_server.env == {"API_KEY": "k-123", "MODE": "ro"}
    assert admin_client.post(url, {**data, "enabled": "on"}).status_code == 302
    stdio_secret_server.refresh_from_db()
    assert stdio_secret_server.status == McpServer.Status.PENDING


def test_the_detail_page_listens_to_its_own_servers_socket(viewer_client, secret_server):
    html = viewer_client.get(reverse("mcp_servers:server_detail", args=[secret_server.pk])).content.decode()
    assert f'ws-connect="/ws/mcp/status/{secret_server.pk}/"' in html
    assert f'id="mcp-status-{secret_server.pk}"' in html and f'id="mcp-sync-summary-{secret_server.pk}"' in html


def test_a_servers_alwaysload_sends_its_tools_in_full_and_turning_it_off_defers_them_again(admin_client, stdio_secret_server):
    from playground.registry import adapter
    from playground.registry.models import Tool

    for tool in ("read_file", "write_file"):
        Tool.objects.create(name=f"mcp__files__{tool}", description="A file tool.", server=stdio_secret_server,
                            server_name="files", source=Tool.Source.MCP, input_schema={"type": "object", "properties": {}})
    assert set(Tool.objects.filter(deferred=True).values_list("name", flat=True)) == {"mcp__files__read_file", "mcp__files__write_file"}
    assert {t.name for t in adapter.engine_catalog().deferred} == {"mcp__files__read_file", "mcp__files__write_file"}
    url = reverse("mcp_servers:server_edit", args=[stdio_secret_server.pk])
    data = {"name": "files", "transport": "stdio", "command": "/usr/bin/env", "args_text": "mcp-files",
            "env_text": f"API_KEY={SECRET_MASK}\nMODE={SECRET_MASK}", "headers_text": "", "enabled": "on"}
    assert admin_client.post(url, {**data, "always_load": "on"}).status_code == 302
    stdio_secret_server.refresh_from_db()
    assert stdio_secret_server.always_load
    assert not Tool.objects.filter(deferred=True).exists()  # the list's deferred filter follows the server
    catalog = adapter.engine_catalog()  # a new catalog version: no process keeps the old deferral
    assert catalog.deferred == () and all(catalog.get(n).always_load for n in ("mcp__files__read_file", "mcp__files__write_file"))
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[stdio_secret_server.pk])).content.decode()
    assert 'data-testid="server-always-load">yes' in page
    assert admin_client.post(url, data).status_code == 302  # unchecked: deferred again
    assert {t.name for t in adapter.engine_catalog().deferred} == {"mcp__files__read_file", "mcp__files__write_file"}
