"""Export of a server as an mcp.json entry (secrets as placeholders) and import from a Claude Desktop
or .mcp.json config: entries become servers with a sync queued, an existing name is left alone,
each bad entry says why, a bad file is a clear error that imports nothing, and imported env values
are never shown — to admins on the page, nor to viewers anywhere."""
from __future__ import annotations

import json
import sys

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from playground.mcp_servers import config_files, services
from playground.mcp_servers.models import McpServer

pytestmark = pytest.mark.django_db

CLAUDE_DESKTOP = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"GITHUB_TOKEN": "ghp_imported_secret_value_123456"}},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cret-header-9"}},
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
        "bad name!": {"command": "x"},
        "nocommand": {"args": []},
    }
}


@pytest.fixture(autouse=True)
def no_syncs(monkeypatch):
    queued = []
    monkeypatch.setattr(services, "request_sync", lambda server: queued.append(server.name))
    return queued


def upload(client, payload: bytes, name="claude_desktop_config.json"):
    return client.post(reverse("mcp_servers:server_import"), {"config": SimpleUploadedFile(name, payload, "application/json")})


def test_a_claude_desktop_config_is_imported_entry_by_entry(admin_client, no_syncs):
    McpServer.objects.create(name="existing", command="x")
    config = {"mcpServers": {**CLAUDE_DESKTOP["mcpServers"], "existing": {"command": "y"}}}
    html = upload(admin_client, json.dumps(config).encode()).content.decode()
    assert 'data-testid="import-outcome"' in html and "3 servers imported" in html
    files, remote = McpServer.objects.get(name="files"), McpServer.objects.get(name="remote")
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], {"GITHUB_TOKEN": "ghp_imported_secret_value_123456"})
    assert (remote.transport, remote.url, remote.headers) == ("http", "https://mcp.example.com/mcp", {"Authorization": "Bearer s3cret-header-9"})
    assert sorted(no_syncs) == ["files", "legacy", "remote"]
    # The deprecated SSE transport is accepted for old servers (and exported as such again).
    legacy = McpServer.objects.get(name="legacy")
    assert (legacy.transport, legacy.url) == ("sse", "https://old.example.com/sse")
    assert json.loads(admin_client.get(reverse("mcp_servers:server_export", args=[legacy.pk])).content)["mcpServers"]["legacy"] == {
        "type": "sse", "url": "https://old.example.com/sse"}
    assert "bad name!: the name must be" in html and "nocommand: a stdio server needs a command" in html
    assert "existing: a server of that name exists already" in html and McpServer.objects.get(name="existing").command == "x"
    assert "ghp_imported_secret_value_123456" not in html and "s3cret-header-9" not in html


@pytest.mark.parametrize("payload, message", [
    (b"{not json", "the file is not JSON"),
    (b"[1, 2]", "not an object with an mcpServers key"),
    (b'{"servers": {}}', 'no &quot;mcpServers&quot; object'),
    (b'{"mcpServers": {}}', "is empty"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b" " * (config_files.MAX_FILE_BYTES + 10), "larger than"),
])
def test_a_bad_file_is_a_clear_error_and_imports_nothing(admin_client, payload, message):
    response = upload(admin_client, payload)
    assert response.status_code == 400 and message in response.content.decode()
    assert not McpServer.objects.exists()


def test_pasted_json_works_too_and_an_empty_form_says_what_to_do(admin_client):
    response = admin_client.post(reverse("mcp_servers:server_import"), {"config_text": json.dumps({"mcpServers": {"t": {"command": sys.executable}}})})
    assert response.status_code == 200 and McpServer.objects.filter(name="t").exists()
    assert "choose a config file" in admin_client.post(reverse("mcp_servers:server_import"), {}).content.decode()


def test_an_export_is_an_mcp_json_entry_with_placeholders_for_secrets(admin_client, viewer_user):
    stdio = McpServer.objects.create(name="files", command="npx", args=["-y", "pkg", "--api-key", "k-123456789"],
                                     env={"GITHUB_TOKEN": "ghp_exported_secret_value_123456", "PATH": "/usr/bin"})
    http = McpServer.objects.create(name="remote", transport="http", url="https://u:p4ss@mcp.example.com/mcp?key=abc12345",
                                    headers={"Authorization": "Bearer hdr-secret-1"})
    response = admin_client.get(reverse("mcp_servers:server_export", args=[stdio.pk]))
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Disposition"] == 'attachment; filename="files.mcp.json"'
    assert json.loads(response.content) == {"mcpServers": {"files": {
        "command": "npx", "args": ["-y", "pkg", "--api-key", "********"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "PATH": "${PATH}"}}}}
    exported = json.loads(admin_client.get(reverse("mcp_servers:server_export", args=[http.pk])).content)["mcpServers"]["remote"]
    assert exported["type"] == "http" and "p4ss" not in exported["url"] and "abc12345" not in exported["url"]
    assert exported["headers"] == {"Authorization": "${REMOTE_AUTHORIZATION}"}
    # Round trip: the exported file imports again (under another name) as the same kind of server.
    entry = json.loads(response.content)["mcpServers"]["files"]
    upload(admin_client, json.dumps({"mcpServers": {"files-copy": entry}}).encode())
    assert McpServer.objects.get(name="files-copy").env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "PATH": "${PATH}"}
    # Viewers get neither.
    from django.test import Client

    viewer_client = Client()
    viewer_client.force_login(viewer_user)
    assert viewer_client.get(reverse("mcp_servers:server_export", args=[stdio.pk])).status_code == 403
    assert viewer_client.get(reverse("mcp_servers:server_import")).status_code == 403


def test_alwaysload_is_imported_and_exported_with_the_server(admin_client):
    config = {"mcpServers": {"core": {"command": "npx", "args": ["core-mcp"], "alwaysLoad": True},
                             "tail": {"type": "http", "url": "https://mcp.example.com/mcp"},
                             "odd": {"command": "x", "alwaysLoad": "yes"}}}
    html = upload(admin_client, json.dumps(config).encode(), name=".mcp.json").content.decode()
    assert McpServer.objects.get(name="core").always_load and not McpServer.objects.get(name="tail").always_load
    assert "odd: alwaysLoad must be true or false" in html and not McpServer.objects.filter(name="odd").exists()
    for name, flag in (("core", True), ("tail", False)):
        pk = McpServer.objects.get(name=name).pk
        exported = json.loads(admin_client.get(reverse("mcp_servers:server_export", args=[pk])).content)["mcpServers"][name]
        assert exported.get("alwaysLoad", False) is flag
    # The export imports back as the same flag (a round trip through Claude Code's file format).
    McpServer.objects.filter(name="core").delete()
    upload(admin_client, json.dumps({"mcpServers": {"core": config["mcpServers"]["core"]}}).encode())
    assert McpServer.objects.get(name="core").always_load
