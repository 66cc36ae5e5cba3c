"""The connection layer against real servers: our demo server (stdio and streamable HTTP) and
mcp-server-time. Every test checks that no child process outlives it."""
from __future__ import annotations

import sys
import time

import pytest

from playground.mcp_servers.connection import (
    McpCallTimeout,
    McpConnectionError,
    McpServerGone,
    call_server_tool,
    check_connection,
    list_server_tools,
)
from playground.mcp_servers.transports import ServerConfig
from tests.mcp_servers.conftest import demo_config, free_port, time_config

pytestmark = pytest.mark.usefixtures("no_stray_processes")

DEMO_TOOLS = {"add", "echo", "lookup_city_timezone", "weather_forecast", "render_badge", "fail", "slow", "crash", "ask_model", "list_roots", "book_table", "bump_counter", "emit_logs", "long_task", "toggle_extra_tool"}


def test_it_lists_the_demo_servers_tools_over_stdio():
    tools, probe = list_server_tools(demo_config())
    assert {t.name for t in tools} == DEMO_TOOLS
    assert probe.server_name == "playground-demo"
    echo = next(t for t in tools if t.name == "echo")
    assert echo.meta == {"anthropic/alwaysLoad": True}
    add = next(t for t in tools if t.name == "add")
    assert add.input_schema["type"] == "object"
    assert set(add.input_schema["required"]) == {"a", "b"}


def test_it_follows_tools_list_cursors_page_by_page():
    tools, probe = list_server_tools(demo_config(DEMO_SERVER_PAGE_SIZE="3"))
    assert [t.name for t in tools] == [t.name for t in list_server_tools(demo_config())[0]]
    assert probe.tool_count == len(DEMO_TOOLS)


def test_it_lists_and_calls_over_streamable_http(http_demo_server):
    config = http_demo_server.config()
    tools, probe = list_server_tools(config)
    assert {t.name for t in tools} == DEMO_TOOLS
    result = call_server_tool(config, "add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.structured == {"result": 42.0}


def test_a_call_with_arguments_returns_text_and_structured_content():
    result = call_server_tool(demo_config(), "lookup_city_timezone", {"city": "Tokyo"})
    assert result.is_error is False
    assert result.structured == {"city": "Tokyo", "timezone": "Asia/Tokyo"}
    assert "Asia/Tokyo" in result.content[0]["text"]


def test_an_image_result_keeps_its_content_type():
    result = call_server_tool(demo_config(), "render_badge", {"color": "blue"})
    assert result.content[0]["type"] == "image"
    assert result.content[0]["mimeType"] == "image/png"


def test_a_tool_error_comes_back_as_is_error():
    result = call_server_tool(demo_config(), "fail", {"reason": "no such account"})
    assert result.is_error is True
    assert "no such account" in result.content[0]["text"]


def test_a_call_that_times_out_raises_a_timeout_and_stops_the_server():
    started = time.monotonic()
    with pytest.raises(McpCallTimeout, match="timed out after 0.5 s"):
        call_server_tool(demo_config(), "slow", {"seconds": 30}, timeout=0.5)
    assert time.monotonic() - started < 15  # the 30 s sleep was not waited out


def test_a_server_that_crashes_mid_call_is_reported_as_gone():
    with pytest.raises(McpServerGone, match="closed the connection"):
        call_server_tool(demo_config(), "crash", {})


def test_a_command_that_does_not_exist_fails_with_a_clear_message():
    config = ServerConfig(name="nope", transport="stdio", command="/nonexistent/mcp-server")
    with pytest.raises(McpConnectionError, match="could not connect.*No such file"):
        check_connection(config)


def test_a_server_that_exits_at_start_quotes_its_stderr():
    config = ServerConfig(
        name="broken", transport="stdio", command=sys.executable, args=("-c", "import sys; sys.exit('missing API key')")
    )
    with pytest.raises(McpConnectionError, match="(?s)could not connect.*missing API key"):
        check_connection(config)


def test_an_http_url_that_refuses_connections_fails_fast():
    config = ServerConfig(name="refused", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp")
    started = time.monotonic()
    with pytest.raises(McpConnectionError, match="could not connect.*ConnectError"):
        check_connection(config)
    assert time.monotonic() - started < 15


def test_mcp_server_time_lists_and_answers():
    tools, probe = list_server_tools(time_config())
    assert {t.name for t in tools} == {"get_current_time", "convert_time"}
    result = call_server_tool(time_config(), "get_current_time", {"timezone": "Europe/Berlin"})
    assert not result.is_error
    assert result.structured["timezone"] == "Europe/Berlin"


def test_a_command_that_never_answers_initialize_times_out_and_is_stopped():
    config = ServerConfig(name="mute", transport="stdio", command=sys.executable, args=("-c", "import time; time.sleep(60)"))
    with pytest.raises(McpConnectionError, match="no answer to initialize in time"):
        check_connection(config, timeout=1)


def test_an_http_endpoint_that_is_not_mcp_fails_clearly(http_demo_server):
    config = ServerConfig(name="wrong-path", transport="http", url=http_demo_server.url.replace("/mcp", "/nothing-here"))
    with pytest.raises(McpConnectionError, match="could not connect"):
        check_connection(config, timeout=5)
