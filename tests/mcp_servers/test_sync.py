"""services.sync_server against the real demo server: statuses, rows, local flags, name rewriting."""
from __future__ import annotations

import sys

import pytest

from playground.mcp_servers import services
from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]


def tool_names(server: McpServer) -> set[str]:
    return set(Tool.objects.filter(server=server).values_list("name", flat=True))


def test_a_sync_stores_the_tools_as_mcp_rows_and_connects(stdio_demo_row):
    result = services.sync_server(stdio_demo_row)
    stdio_demo_row.refresh_from_db()
    assert result.ok, result.error
    assert stdio_demo_row.status == McpServer.Status.CONNECTED
    assert stdio_demo_row.last_synced_at is not None
    assert stdio_demo_row.last_error == ""
    assert tool_names(stdio_demo_row) == {f"mcp__demo__{n}" for n in
                                         ["add", "echo", "lookup_city_timezone", "weather_forecast", "render_badge", "fail", "slow", "crash", "ask_model", "list_roots", "book_table", "bump_counter", "emit_logs", "long_task", "toggle_extra_tool"]}
    echo = Tool.objects.get(name="mcp__demo__echo")
    assert echo.always_load is True  # from _meta["anthropic/alwaysLoad"]
    assert echo.source == Tool.Source.MCP and echo.server_name == "demo"
    assert Tool.objects.get(name="mcp__demo__add").always_load is False
    assert all(t.token_estimate > 0 for t in Tool.objects.filter(server=stdio_demo_row))
    assert stdio_demo_row.last_sync_result["server_info"]["name"] == "playground-demo"
    assert len(result.added) == 15 and result.removed == [] and result.updated == []


def test_a_second_sync_adds_changes_and_removes_tools_and_keeps_local_flags(stdio_demo_row):
    services.sync_server(stdio_demo_row)
    Tool.objects.filter(name="mcp__demo__add").update(search_hint="sum plus arithmetic", enabled=False)
    Tool.objects.filter(name="mcp__demo__fail").update(always_load=True)  # an admin override
    Tool.objects.filter(name="mcp__demo__echo").update(should_defer=False)

    stdio_demo_row.env = {"DEMO_SERVER_VARIANT": "2"}
    stdio_demo_row.save()
    result = services.sync_server(stdio_demo_row)

    assert result.ok, result.error
    names = tool_names(stdio_demo_row)
    assert "mcp__demo__weather_forecast" not in names
    assert result.removed == ["mcp__demo__weather_forecast"]
    assert "mcp__demo__reverse_text" in result.added
    assert result.updated == ["mcp__demo__echo"]
    assert "variant 2" in Tool.objects.get(name="mcp__demo__echo").description
    add = Tool.objects.get(name="mcp__demo__add")
    assert (add.search_hint, add.enabled) == ("sum plus arithmetic", False)
    assert Tool.objects.get(name="mcp__demo__fail").always_load is True
    assert Tool.objects.get(name="mcp__demo__echo").should_defer is False


def test_a_name_that_breaks_the_rule_is_reported_and_rewritten_deterministically(stdio_demo_row):
    stdio_demo_row.env = {"DEMO_SERVER_VARIANT": "2"}
    stdio_demo_row.save()
    result = services.sync_server(stdio_demo_row)
    expected, warning = services.registry_tool_name("demo", "convert.units")
    assert expected.startswith("mcp__demo__convert_units_") and len(expected) <= 64
    assert warning in result.warnings
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.CONNECTED
    assert warning in stdio_demo_row.sync_warnings
    assert stdio_demo_row.tool_names[expected]["original"] == "convert.units"
    # The same input gives the same name on every sync.
    assert services.sync_server(stdio_demo_row).ok
    assert expected in tool_names(stdio_demo_row)


def test_registry_names_fit_the_rule_whatever_the_server_calls_its_tools():
    from playground.engine.tools import TOOL_NAME_PATTERN

    for original in ["a b", "x" * 100, "über.tool", "...", "ok_name"]:
        name, warning = services.registry_tool_name("some-server", original)
        assert TOOL_NAME_PATTERN.fullmatch(name), name
        assert (warning is None) == (original == "ok_name")
    assert services.registry_tool_name("s", "a.b")[0] != services.registry_tool_name("s", "a b")[0]


def test_a_command_that_does_not_exist_fails_the_sync_with_the_error_shown(db):
    server = McpServer.objects.create(name="ghost", command="/nonexistent/mcp-server")
    result = services.sync_server(server)
    server.refresh_from_db()
    assert not result.ok
    assert server.status == McpServer.Status.FAILED
    assert "No such file" in server.last_error
    assert server.last_attempt_at is not None and server.last_synced_at is None


def test_a_refused_http_url_fails_the_sync(db):
    from tests.mcp_servers.conftest import free_port

    server = McpServer.objects.create(name="refused", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp")
    result = services.sync_server(server)
    server.refresh_from_db()
    assert server.status == McpServer.Status.FAILED
    assert not result.ok
    assert server.last_error == result.error
    assert "ConnectError" in server.last_error


def test_a_failed_sync_keeps_the_tools_of_the_last_good_one(stdio_demo_row):
    services.sync_server(stdio_demo_row)
    stdio_demo_row.command = "/nonexistent/python"
    stdio_demo_row.save()
    assert not services.sync_server(stdio_demo_row).ok
    assert len(tool_names(stdio_demo_row)) == 15


def test_a_disabled_server_is_not_contacted(stdio_demo_row):
    stdio_demo_row.enabled = False
    stdio_demo_row.save()
    result = services.sync_server(stdio_demo_row)
    stdio_demo_row.refresh_from_db()
    assert not result.ok and stdio_demo_row.status == McpServer.Status.DISABLED
    assert tool_names(stdio_demo_row) == set()


def test_an_http_server_syncs(db, http_demo_server):
    server = McpServer.objects.create(name="demo-http", transport="http", url=http_demo_server.url)
    assert services.sync_server(server).ok
    assert "mcp__demo-http__lookup_city_timezone" in tool_names(server)


def test_mcp_server_time_syncs(db):
    server = McpServer.objects.create(
        name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
    )
    assert services.sync_server(server).ok
    assert tool_names(server) == {"mcp__time__get_current_time", "mcp__time__convert_time"}


def test_register_demo_servers_is_idempotent(db):
    first = services.register_demo_servers()
    second = services.register_demo_servers()
    assert [s.pk for s in first] == [s.pk for s in second]
    assert [s.name for s in first] == ["demo", "time"]
    assert McpServer.objects.count() == 2
    assert first[0].command == sys.executable


def test_register_demo_servers_can_add_the_http_variant(db):
    servers = services.register_demo_servers(http_url="http://127.0.0.1:8765/mcp")
    assert [s.name for s in servers] == ["demo", "time", "demo-http"]
    assert servers[2].transport == "http"


def test_the_registered_demo_servers_sync(db):
    results = [services.sync_server(s) for s in services.register_demo_servers()]
    assert all(r.ok for r in results), [r.error for r in results]
