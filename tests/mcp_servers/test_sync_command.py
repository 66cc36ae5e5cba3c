"""`manage.py sync_mcp_servers`: registers and syncs the demo servers, reports failures."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]


def test_it_registers_and_syncs_the_demo_servers():
    out = StringIO()
    call_command("sync_mcp_servers", "--demo", stdout=out)
    assert "demo: connected, 15 tools" in out.getvalue() and "time: connected, 2 tools" in out.getvalue()
    assert set(McpServer.objects.values_list("status", flat=True)) == {"connected"}
    assert Tool.objects.filter(source="mcp").count() == 17


def test_a_failing_server_makes_the_command_fail_with_its_error():
    McpServer.objects.create(name="ghost", command="/nonexistent/mcp-server")
    err = StringIO()
    with pytest.raises(CommandError, match="1 server"):
        call_command("sync_mcp_servers", "ghost", stderr=err)
    assert "ghost: failed" in err.getvalue() and "No such file" in err.getvalue()


def test_an_unknown_name_is_an_error():
    with pytest.raises(CommandError, match="no MCP server named nope"):
        call_command("sync_mcp_servers", "nope")
