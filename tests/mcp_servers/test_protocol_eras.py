"""Both MCP protocol eras as a client: the per-server "protocol era" (legacy / auto / a pinned
stateless version) against our demo server, which serves both (and, with DEMO_SERVER_MODERN_ONLY,
only 2026-07-28), over stdio and stateless streamable HTTP; sync, call, resources, prompts, the
negotiated version on the server page, MRTR rounds and ttlMs."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.urls import reverse

from playground.mcp_servers.connection import (
    ClientHandlers,
    McpConnectionError,
    background_loop,
    call_server_tool,
    list_server_tools,
    open_connection,
)
from playground.mcp_servers.transports import ServerConfig
from tests.mcp_servers.conftest import DEMO_ARGS, HttpDemoServer, demo_config

MODERN = "2026-07-28"
LEGACY_LATEST = "2025-11-25"


def era_config(era: str, **env: str) -> ServerConfig:
    config = demo_config(**env)
    return ServerConfig(name=config.name, transport="stdio", command=config.command, args=config.args,
                        env=config.env, protocol_era=era)


class StatelessModernServer(HttpDemoServer):
    """The demo server over HTTP with no session (the SDK's stateless manager), 2026-07-28 only."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from tests.mcp_servers.conftest import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, *DEMO_ARGS, "--http", "--stateless", "--port", str(self.port)],
            env={**os.environ, "DEMO_SERVER_MODERN_ONLY": "1", **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._wait_listening()

    def _wait_listening(self) -> None:
        import socket
        import time

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the stateless demo server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the stateless demo server did not start listening within 30 s")


@pytest.fixture(scope="module")
def modern_only_server():
    server = StatelessModernServer(env={"DEMO_SERVER_TOOLS_TTL_MS": "600000"})
    yield server
    server.stop()


@pytest.mark.parametrize("era, expected", [("legacy", LEGACY_LATEST), ("auto", MODERN), (MODERN, MODERN)])
def test_each_era_lists_calls_reads_and_gets_over_stdio(era, expected):
    async def run():
        async with open_connection(era_config(era)) as connection:
            tools = await connection.list_tools()
            added = await connection.call_tool("add", {"a": 2, "b": 40})
            contents = await connection.read_resource("demo://readme")
            prompt = await connection.get_prompt("plan_trip", {"city": "Paris"})
            await connection.ping()  # a server/discover round trip in the stateless era
            return connection.protocol_version, connection.stateless, tools, added, contents, prompt

    version, stateless, tools, added, contents, prompt = background_loop().run(run())
    assert version == expected and stateless == (expected == MODERN)
    assert "ask_model" in {t.name for t in tools}
    assert not added.is_error and "42" in added.content[0]["text"]
    assert contents[0]["text"].startswith("# playground-demo")
    assert "Paris" in prompt["messages"][0]["content"]["text"]


def test_a_modern_only_server_is_refused_in_the_legacy_era_and_reached_in_auto(modern_only_server):
    url = modern_only_server.url
    with pytest.raises(McpConnectionError, match="could not connect"):
        list_server_tools(ServerConfig(name="m", transport="http", url=url, protocol_era="legacy"))
    tools, probe = list_server_tools(ServerConfig(name="m", transport="http", url=url, protocol_era="auto"))
    assert probe.protocol_version == MODERN and probe.tools_ttl_ms == 600000
    assert "add" in {t.name for t in tools}
    result = call_server_tool(ServerConfig(name="m", transport="http", url=url, protocol_era=MODERN), "add", {"a": 1, "b": 2})
    assert not result.is_error and "3" in result.content[0]["text"]


def test_a_pinned_version_against_a_server_that_does_not_speak_it_says_so():
    """A server of the handshake era only (no server/discover, over HTTP): pinned fails saying why;
    auto falls back to the handshake."""
    old = HttpDemoServer(env={"DEMO_SERVER_LEGACY_ONLY": "1"})
    try:
        with pytest.raises(McpConnectionError, match="does not speak MCP 2026-07-28"):
            list_server_tools(ServerConfig(name="old", transport="http", url=old.url, protocol_era=MODERN))
        _, probe = list_server_tools(ServerConfig(name="old", transport="http", url=old.url, protocol_era="auto"))
        assert probe.protocol_version == LEGACY_LATEST
    finally:
        old.stop()


def test_input_required_rounds_go_to_the_sessions_handlers_and_back_with_the_answer():
    """MRTR: the stateless demo server answers ask_model / list_roots / book_table with an
    InputRequiredResult; the connection hands each input request to the handlers (the workbench's
    ask a person) and sends the request again with the answers."""
    import mcp_types as types

    asked: list[str] = []

    async def sampling(context, params):
        asked.append("sampling:" + params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", model="a person", content=types.TextContent(type="text", text="Paris"))

    async def roots(context):
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/data", name="data")])

    async def elicitation(context, params):
        asked.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": "Ada", "guests": 2, "seating": "outdoor", "vegetarian": True})

    handlers = ClientHandlers(sampling=sampling, list_roots=roots, elicitation=elicitation)

    async def run():
        async with open_connection(era_config(MODERN), handlers=handlers) as connection:
            return [await connection.call_tool("ask_model", {"question": "Capital of France?"}),
                    await connection.call_tool("list_roots", {}),
                    await connection.call_tool("book_table", {"restaurant": "Chez Demo"})]

    answered, listed, booked = background_loop().run(run())
    assert asked == ["sampling:Capital of France?", "roots", "elicitation"]
    assert "Paris" in answered.content[0]["text"] and "a person" in answered.content[0]["text"]
    assert "file:///srv/data (data)" in listed.content[0]["text"]
    assert "for 2 under Ada, outdoor, vegetarian" in booked.content[0]["text"]


def test_without_handlers_an_input_request_is_refused_not_answered():
    """The agent loop's and the gateway's sessions have no handlers: nothing answers for a person."""
    result_or_error = None
    try:
        result_or_error = call_server_tool(era_config(MODERN), "ask_model", {"question": "anything"})
    except Exception as exc:  # noqa: BLE001 - the refusal may come back as an error or an error result
        result_or_error = exc
    if isinstance(result_or_error, Exception):
        assert "sampling" in str(result_or_error).lower() or "not supported" in str(result_or_error).lower()
    else:
        assert result_or_error.is_error


@pytest.mark.django_db
def test_a_stateless_server_registers_syncs_shows_its_version_and_its_fresh_list_is_left_alone(
        modern_only_server, admin_client):
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.services import sync_server

    assert McpServer(name="new").protocol_era == "legacy"  # the default, until the workbench speaks both eras in full
    server = McpServer.objects.create(name="modern", transport="http", url=modern_only_server.url, protocol_era="auto")
    result = sync_server(server)
    assert result.ok, result.error
    server.refresh_from_db()
    assert server.negotiated_version == MODERN and server.tools.filter(name="mcp__modern__add").exists()
    assert server.tools_fresh_until is not None

    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="negotiated-version">2026-07-28<' in page and "Auto (server/discover" in page
    assert "fresh until" in page

    out = io.StringIO()
    call_command("sync_mcp_servers", stdout=out)
    assert "modern: tool list fresh until" in out.getvalue() and "skipped" in out.getvalue()
    out = io.StringIO()
    call_command("sync_mcp_servers", "--force", stdout=out)
    assert "skipped" not in out.getvalue()

    server.protocol_era = "legacy"
    server.save()
    failed = sync_server(server)
    assert not failed.ok and "could not connect" in failed.error


@pytest.mark.django_db
def test_the_server_form_sets_the_era(admin_client):
    from playground.mcp_servers.models import McpServer

    response = admin_client.post(reverse("mcp_servers:server_create"), {
        "name": "pinned", "transport": "stdio", "command": sys.executable, "args_text": "\n".join(DEMO_ARGS),
        "protocol_era": MODERN, "enabled": "on", "env_text": "", "headers_text": "", "url": ""})
    assert response.status_code in (200, 302)
    assert McpServer.objects.get(name="pinned").protocol_era == MODERN
    response = admin_client.post(reverse("mcp_servers:server_create"), {
        "name": "bad-era", "transport": "stdio", "command": sys.executable, "protocol_era": "1999-01-01",
        "enabled": "on", "args_text": "", "env_text": "", "headers_text": "", "url": ""})
    assert response.status_code == 200 and not McpServer.objects.filter(name="bad-era").exists()
    assert "Select a valid choice" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("era", ["legacy", MODERN])
def test_our_trace_context_rides_in_meta_while_tracing_is_on(settings, era):
    from playground import telemetry
    from playground.mcp_servers import trace_context
    from playground.mcp_servers.executor import call_registered_tool
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.session_pool import SessionPool

    server = McpServer.objects.create(name="traced", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                                      env={"DEMO_SERVER_SHOW_META": "1"}, protocol_era=era)
    pool = SessionPool()
    try:
        trace_id, span_id = telemetry.ids_for("a test trace")
        settings.OTEL_TRACES_ENABLED = False
        with trace_context.spans_under(trace_id, span_id):
            off, _ = call_registered_tool(server, "mcp__traced__show_trace_context", {}, pool=pool)
        settings.OTEL_TRACES_ENABLED = True
        with trace_context.spans_under(trace_id, span_id):
            on, _ = call_registered_tool(server, "mcp__traced__show_trace_context", {}, pool=pool)
        outside, _ = call_registered_tool(server, "mcp__traced__show_trace_context", {}, pool=pool)
    finally:
        pool.close_all()
    assert off.text() == "none" and outside.text() == "none"
    assert on.text() == f"00-{trace_id:032x}-{span_id:016x}-01"


@pytest.mark.django_db
def test_one_default_era_is_read_wherever_a_server_gets_one_without_saying(admin_client):
    """protocol_eras.DEFAULT_PROTOCOL_ERA is the model field's default, the form's choice for a new
    server (shown, and when a script leaves the field out), an imported .mcp.json entry's, and the
    connection settings' (ServerConfig, and one built from a row without an era). They disagreed:
    the model said legacy, the form's fallback and ServerConfig said auto."""
    from playground.mcp_servers.config_files import import_servers
    from playground.mcp_servers.forms import McpServerForm
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.protocol_eras import DEFAULT_PROTOCOL_ERA

    assert McpServer(name="new").protocol_era == DEFAULT_PROTOCOL_ERA
    assert McpServerForm()["protocol_era"].value() == DEFAULT_PROTOCOL_ERA
    fields = {"transport": "stdio", "command": sys.executable, "args_text": "", "enabled": "on", "env_text": "",
              "headers_text": "", "url": ""}
    response = admin_client.post(reverse("mcp_servers:server_create"), {"name": "no-era", **fields})  # field left out
    assert response.status_code in (200, 302)
    assert McpServer.objects.get(name="no-era").protocol_era == DEFAULT_PROTOCOL_ERA
    outcome = import_servers({"imported": {"command": sys.executable}, "remote": {"type": "http", "url": "https://x.example/mcp"}})
    assert [s.protocol_era for s in outcome.created] == [DEFAULT_PROTOCOL_ERA] * 2
    assert ServerConfig(name="c", transport="stdio").protocol_era == DEFAULT_PROTOCOL_ERA

    class RowWithoutEra:
        name, transport, command, args, env, url, headers = "r", "stdio", "x", [], {}, "", {}

    assert ServerConfig.from_server(RowWithoutEra()).protocol_era == DEFAULT_PROTOCOL_ERA
