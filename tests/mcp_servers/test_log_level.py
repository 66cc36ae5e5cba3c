"""Log level at the workbench (logging/setLevel), against the demo server's `emit_logs`: after a
level is set the server sends only that level and above, and those messages arrive in the server
log as `log:<level>` lines; a bad level is a 400; a server without logging says so."""
from __future__ import annotations

import sys

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.models import McpCallRecord, McpLogLine, McpServer
from playground.registry.models import Tool
from tests.mcp_servers.conftest import DEMO_ARGS, demo_config
from tests.polling import wait_until

HTMX = {"HTTP_HX_REQUEST": "true"}


def set_level(client, server, level):
    return client.post(reverse("mcp_servers:server_log_level", args=[server.pk]), {"level": level}, **HTMX)


def emit(client, server, message):
    tool = Tool.objects.get(name="mcp__demo__emit_logs")
    html = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]),
                       {f"t{tool.pk}-mode": "form", f"t{tool.pk}-arg__message": message, f"t{tool.pk}-timeout": "20"},
                       **HTMX).content.decode()
    return html.split('id="mcp-history"')[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_stray_processes")
def test_the_level_set_is_what_the_server_sends_and_its_messages_reach_the_log(admin_client, stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    html = set_level(admin_client, stdio_demo_row, "warning").content.decode()
    assert 'data-ok="true"' in html and "warning and above" in html
    call = McpCallRecord.objects.get(server=stdio_demo_row, kind="setlevel")
    assert call.ok and call.arguments == {"level": "warning"}

    assert "sent 2 of 5 log messages (level warning: warning, error)" in emit(admin_client, stdio_demo_row, "m1")
    wait_until(lambda: {line.source for line in McpLogLine.objects.filter(server_id=stdio_demo_row.pk, text__contains="m1")}
               == {"log:warning", "log:error"}, "the warning and error lines in the log", timeout=20)

    set_level(admin_client, stdio_demo_row, "debug")
    assert "sent 5 of 5" in emit(admin_client, stdio_demo_row, "m2")
    wait_until(lambda: McpLogLine.objects.filter(server_id=stdio_demo_row.pk, text__contains="m2").count() == 5,
               "all five levels in the log", timeout=20)
    assert McpLogLine.objects.filter(server_id=stdio_demo_row.pk, source="log:debug", text="[demo] debug: m2").exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("no_stray_processes")
def test_a_bad_level_is_a_400_and_a_server_without_logging_says_so(admin_client, stdio_demo_row):
    assert set_level(admin_client, stdio_demo_row, "loud").status_code == 400
    bare = McpServer.objects.create(name="bare", command=sys.executable, args=DEMO_ARGS, env={"DEMO_SERVER_TOOLS_ONLY": "1"})
    html = set_level(admin_client, bare, "error").content.decode()
    assert 'data-ok="false"' in html and "does not offer log levels" in html
