"""PlaygroundExecutor: MCP tools through pooled sessions, built-ins in-process, catalog-only simulated."""
from __future__ import annotations

import base64
import sys
import time

import pytest

from playground.engine.execution import ToolOutcome
from playground.engine.tools import Tool
from playground.mcp_servers import services
from playground.mcp_servers.builtin_sandbox import builtin_sandbox
from playground.mcp_servers.connection import McpCallResult
from playground.conversations.testing.fake_api import validate_image_block
from playground.mcp_servers.executor import MAX_API_IMAGE_BYTES, SIMULATED_PREFIX, PlaygroundExecutor, outcome_from_mcp
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.session_pool import session_pool
from tests.mcp_servers.conftest import child_pids

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]


def mcp_tool(name: str, server: str = "demo") -> Tool:
    return Tool(name=f"mcp__{server}__{name}", is_mcp=True)


@pytest.fixture
def executor():
    return PlaygroundExecutor()


def test_an_mcp_tool_runs_through_its_server(stdio_demo_row, executor):
    outcome = executor.execute(mcp_tool("add"), {"a": 1.5, "b": 2})
    assert isinstance(outcome, ToolOutcome)
    assert not outcome.is_error and not outcome.simulated
    assert outcome.text() == "3.5"
    assert outcome.structured == {"result": 3.5}
    assert outcome.duration_ms > 0


def test_the_session_is_reused_between_calls(stdio_demo_row, executor):
    before = child_pids()
    executor.execute(mcp_tool("echo"), {"text": "one"})
    first_children = child_pids() - before
    assert len(first_children) == 1
    assert executor.execute(mcp_tool("echo"), {"text": "two"}).text() == "two"
    assert child_pids() - before == first_children
    assert session_pool().open_count() == 1


def test_it_reconnects_when_the_server_went_away(stdio_demo_row, executor):
    crashed = executor.execute(mcp_tool("crash"), {})
    assert crashed.is_error
    assert "unavailable" in crashed.text() and "closed the connection" in crashed.text()
    assert executor.execute(mcp_tool("add"), {"a": 1, "b": 1}).text() == "2.0"


def test_a_timeout_becomes_an_error_result(stdio_demo_row, executor):
    outcome = executor.execute(mcp_tool("slow"), {"seconds": 30}, timeout=0.5)
    assert outcome.is_error
    assert "timed out after 0.5 s" in outcome.text()
    assert executor.execute(mcp_tool("add"), {"a": 2, "b": 2}).text() == "4.0"


def test_a_tool_error_keeps_is_error(stdio_demo_row, executor):
    outcome = executor.execute(mcp_tool("fail"), {"reason": "quota exceeded"})
    assert outcome.is_error and "quota exceeded" in outcome.text()


def test_an_image_is_forwarded_as_a_messages_api_image_block(stdio_demo_row, executor):
    outcome = executor.execute(mcp_tool("render_badge"), {"color": "red"})
    image = outcome.content[0]
    assert image["type"] == "image" and image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    validate_image_block(image, "messages.2.content.0.tool_result.content.0")  # what the API would accept


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()


@pytest.mark.parametrize("item, reason", [
    ({"type": "image", "mimeType": "image/bmp", "data": PNG}, "takes only image/jpeg, image/png, image/gif, image/webp"),
    ({"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"\0" * (MAX_API_IMAGE_BYTES + 1)).decode()},
     "over the Messages API's 5 MB limit"),
    ({"type": "image", "mimeType": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"type": "image", "mimeType": "image/png", "data": ""}, "not valid base64"),
    ({"type": "audio", "mimeType": "audio/wav", "data": PNG}, "the Messages API takes no audio"),
])
def test_media_the_api_would_refuse_become_a_note_saying_why(item, reason):
    outcome = outcome_from_mcp(McpCallResult(content=[item, {"type": "text", "text": "done"}]))
    assert [b["type"] for b in outcome.content] == ["text", "text"]
    assert reason in outcome.content[0]["text"] and item["mimeType"] in outcome.content[0]["text"]


def test_an_image_jpg_media_type_is_sent_as_jpeg():
    outcome = outcome_from_mcp(McpCallResult(content=[{"type": "image", "mimeType": "image/jpg", "data": PNG}]))
    assert outcome.content[0]["source"]["media_type"] == "image/jpeg"


def test_a_sanitised_name_calls_the_servers_original_tool(stdio_demo_row, executor):
    stdio_demo_row.env = {"DEMO_SERVER_VARIANT": "2"}
    stdio_demo_row.save()
    services.sync_server(stdio_demo_row)
    name, _ = services.registry_tool_name("demo", "convert.units")
    outcome = executor.execute(Tool(name=name, is_mcp=True), {"value": 1, "to": "feet"})
    assert not outcome.is_error, outcome.text()
    assert outcome.text() == "3.281 feet"


def test_a_disabled_server_gives_an_error(stdio_demo_row, executor):
    stdio_demo_row.enabled = False
    stdio_demo_row.save()
    outcome = executor.execute(mcp_tool("add"), {"a": 1, "b": 1})
    assert outcome.is_error and "disabled" in outcome.text()


def test_an_unreachable_server_gives_an_error(db, executor):
    McpServer.objects.create(name="ghost", command="/nonexistent/mcp-server")
    outcome = executor.execute(mcp_tool("anything", server="ghost"), {})
    assert outcome.is_error and "unavailable" in outcome.text() and "No such file" in outcome.text()


def test_mcp_server_time_answers_through_the_executor(db, executor):
    McpServer.objects.create(name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
    outcome = executor.execute(mcp_tool("get_current_time", server="time"), {"timezone": "Asia/Tokyo"})
    assert not outcome.is_error, outcome.text()
    assert outcome.structured["timezone"] == "Asia/Tokyo"


def test_a_builtin_runs_in_a_helper_process_not_in_the_caller(db, executor):
    outcome = executor.execute(Tool(name="calculator"), {"expression": "(2 + 3) * sqrt(16)"})
    assert outcome.structured == {"expression": "(2 + 3) * sqrt(16)", "value": 20.0}
    assert not outcome.simulated
    helpers = {helper.process.pid for helper in builtin_sandbox()._idle}
    assert helpers and helpers <= child_pids()


def test_a_runaway_expression_is_a_quick_error_not_a_stall(db, executor):
    started = time.perf_counter()
    outcome = executor.execute(Tool(name="calculator"), {"expression": "((9**999)**999)**99"})
    assert outcome.is_error and "too large" in outcome.text()
    assert time.perf_counter() - started < 2


def test_a_builtin_with_bad_arguments_gives_an_error(db, executor):
    outcome = executor.execute(Tool(name="calculator"), {"expression": "__import__('os')"})
    assert outcome.is_error and "unsupported" in outcome.text()
    assert executor.execute(Tool(name="word_count"), {}).is_error


def test_a_catalog_only_tool_is_simulated(db, executor):
    outcome = executor.execute(Tool(name="create_invoice"), {"amount": 3})
    assert outcome.simulated and not outcome.is_error
    assert outcome.text().startswith(SIMULATED_PREFIX)
    imported = executor.execute(mcp_tool("create_issue", server="github"), {"title": "x"})
    assert imported.simulated and "no MCP server named 'github'" in imported.text()


def test_non_object_arguments_give_an_error(db, executor):
    assert executor.execute(Tool(name="echo"), ["not", "a", "dict"]).is_error  # type: ignore[arg-type]


def test_structured_only_results_get_a_text_block():
    outcome = outcome_from_mcp(McpCallResult(content=[], structured={"a": 1}))
    assert outcome.text() == '{"a": 1}'
    assert outcome_from_mcp(McpCallResult(content=[], structured=None)).text() == "(the tool returned no content)"


def test_an_mcp_tool_runs_over_streamable_http(db, executor, http_demo_server):
    McpServer.objects.create(name="demo-http", transport="http", url=http_demo_server.url)
    first = executor.execute(mcp_tool("lookup_city_timezone", server="demo-http"), {"city": "Berlin"})
    second = executor.execute(mcp_tool("add", server="demo-http"), {"a": 1, "b": 1})
    assert first.structured == {"city": "Berlin", "timezone": "Europe/Berlin"}
    assert second.text() == "2.0"
    assert session_pool().open_count() == 1  # one HTTP session reused for both calls
