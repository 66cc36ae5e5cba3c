"""A real MCP client (the SDK's streamable HTTP client) against the gateway served by Daphne."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@asynccontextmanager
async def connect(url: str, token: str, notifications: list | None = None):
    async def on_message(message) -> None:
        if notifications is not None and not isinstance(message, Exception):
            notifications.append(message)

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, message_handler=on_message,
                                     client_info=types.Implementation(name="pytest-gateway-client", version="9.9")) as session:
                await session.initialize()
                yield session


def names(result) -> list[str]:
    return [t.name for t in result.tools]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def in_thread_db(func):
    """ORM work from inside the client's event loop: in a thread, with its own connection closed after."""
    from django.db import connection

    def run():
        try:
            return func()
        finally:
            connection.close()

    return asyncio.to_thread(run)


def test_a_client_lists_searches_loads_and_calls_through_the_gateway(live_gateway, gateway_world):
    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    notifications: list = []

    async def flow():
        async with connect(url, token, notifications) as session:
            first = await session.list_tools()
            listed = names(first)
            assert "ToolSearch" in listed and "echo" in listed and "CallDiscoveredTool" in listed
            assert "word_count" not in listed and "mcp__weather__get_forecast" not in listed  # deferred
            tool_search = next(t for t in first.tools if t.name == "ToolSearch")
            assert "<available-deferred-tools>" in tool_search.description and "word_count" in tool_search.description

            found = await session.call_tool("ToolSearch", {"query": "select:word_count"})
            assert not found.is_error, text_of(found)
            assert json.loads(found.content[0].text)["matches"] == ["word_count"]
            with anyio.fail_after(5):
                while not any(isinstance(n, types.ToolListChangedNotification) or
                              getattr(getattr(n, "root", None), "method", "") == "notifications/tools/list_changed"
                              for n in notifications):
                    await anyio.sleep(0.05)

            second = await session.list_tools()
            assert "word_count" in names(second)
            counted = await session.call_tool("word_count", {"text": "one two three"})
            assert not counted.is_error, text_of(counted)
            assert "3" in text_of(counted)

            # The meta tool reaches a discovered tool too, and refuses one not found yet.
            via_meta = await session.call_tool("CallDiscoveredTool", {"name": "word_count", "arguments": {"text": "a b"}})
            assert not via_meta.is_error and "2" in text_of(via_meta)
            early = await session.call_tool("calculator", {"expression": "1+1"})
            assert early.is_error and "select:calculator" in text_of(early)

            # A deny rule added while the session is open: the next call is refused, saying so.
            def deny():
                from playground.registry.models import PermissionRule

                PermissionRule.objects.create(effect="deny", pattern="word_count", profile=None)

            await in_thread_db(deny)
            denied = await session.call_tool("word_count", {"text": "one two"})
            assert denied.is_error
            assert "denied" in text_of(denied)
            return session

    anyio.run(flow)

    from playground.gateway.models import GatewaySession

    session = GatewaySession.objects.get(profile=profile)
    wait_for_event(session, "session_closed")  # the client's DELETE on leaving, recorded after it is answered
    assert (session.client_name, session.client_version) == ("pytest-gateway-client", "9.9")
    assert session.discovered_tools == ["word_count"]
    events = list(session.events.order_by("sequence"))
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    types_seen = [e.type for e in events]
    assert types_seen[0] == "session_started"
    assert types_seen.count("tools_listed") == 2 and "tool_search" in types_seen
    calls = [e.payload for e in events if e.type == "tool_call"]
    assert [c["name"] for c in calls] == ["word_count", "word_count", "calculator", "word_count"]
    assert calls[0]["permission"] == "allow" and not calls[0]["is_error"] and calls[0]["duration_ms"] >= 0
    assert calls[1]["via"] == "CallDiscoveredTool"
    assert calls[-1]["permission"] == "deny" and calls[-1]["refused"]
    assert types_seen[-1] == "session_closed"


def wait_for_event(session, kind: str, timeout: float = 5.0) -> None:
    wait_until(lambda: session.events.filter(type=kind).exists(), f"a {kind} event", timeout)


def raw_request(url: str, headers: dict[str, str], message: dict) -> tuple[int, list[dict]]:
    """One JSON-RPC message over a fresh HTTP connection; the messages of the SSE (or JSON) answer."""
    request = urllib.request.Request(url, data=json.dumps(message).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as error:
        return error.code, []
    if body.lstrip().startswith("{"):
        return status, [json.loads(body)]
    return status, [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


def test_discovered_tools_stay_with_the_session_across_connections(live_gateway, gateway_world):
    """A session's discovered tools live in the database under its Mcp-Session-Id: a new client
    connection carrying that id sees them; another token cannot use the session at all."""
    from playground.gateway.models import GatewaySession
    from playground.gateway.tokens import issue_token

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)

    async def flow():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url, http_client=http, terminate_on_close=False) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("ToolSearch", {"query": "select:calculator"})

    anyio.run(flow)
    session_id = GatewaySession.objects.get(profile=profile).session_id
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    status, messages = raw_request(url, headers, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert status == 200
    listed = [t["name"] for t in next(m for m in messages if m.get("id") == 7)["result"]["tools"]]
    assert "calculator" in listed and "word_count" not in listed
    status, messages = raw_request(url, headers, {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                                  "params": {"name": "calculator", "arguments": {"expression": "2+3"}}})
    result = next(m for m in messages if m.get("id") == 8)["result"]
    assert not result.get("isError") and "5" in result["content"][0]["text"]

    _, second = issue_token(profile, "a second client")
    status, _ = raw_request(url, {**headers, "Authorization": f"Bearer {second}"}, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    assert status == 404  # the session belongs to the token that opened it


def test_search_results_are_the_engines_for_the_same_profile_and_query(live_gateway, gateway_world):
    from playground.engine.toolsearch_tool import run_tool_search
    from playground.gateway.service import profile_view

    profile = gateway_world["profile"]
    view = profile_view(profile.pk)
    queries = ["weather forecast", "+count words", "count", "select:calculator,nope", "mcp__weather", "calculator"]
    expected = {
        q: run_tool_search({"query": q}, view.plan.searchable, view.backend(),
                           default_max_results=view.agent_settings.max_results).to_output()
        for q in queries
    }

    async def flow():
        got = {}
        async with connect(live_gateway.endpoint(profile.pk), gateway_world["token"]) as session:
            for q in queries:
                result = await session.call_tool("ToolSearch", {"query": q})
                text = result.content[0].text
                got[q] = json.loads(text) if text.startswith("{") else text
        return got

    got = anyio.run(flow)
    for q in queries:
        if expected[q]["matches"]:
            assert got[q] == expected[q], q
        else:
            assert isinstance(got[q], str) and "No matching deferred tools" in got[q], q


def post_initialize(url: str, headers: dict[str, str]) -> tuple[int, str]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(2000).decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def test_requests_without_a_valid_token_are_refused_and_logged(live_gateway, gateway_world):
    from playground.gateway.tokens import revoke_token

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    assert post_initialize(url, {})[0] == 401
    assert post_initialize(url, {"Authorization": "Bearer tsg_not-a-token"})[0] == 401
    assert post_initialize(url, {"Authorization": f"Bearer {gateway_world['other_token']}"})[0] == 401  # another profile's
    assert post_initialize(url, {"Authorization": f"Bearer {token}", "Origin": "http://evil.example"})[0] == 403
    assert post_initialize(url, {"Authorization": f"Bearer {token}"})[0] == 200
    revoke_token(gateway_world["token_row"])
    assert post_initialize(url, {"Authorization": f"Bearer {token}"})[0] == 401

    with pytest.raises(BaseException):  # noqa: B017 - the SDK client fails to initialize on a 401
        async def flow():
            async with connect(url, "tsg_wrong"):
                pass

        anyio.run(flow)
    logs = live_gateway.logs()
    assert "MCP gateway refused" in logs and "unknown token" in logs and "no bearer token" in logs
    assert "revoked token" in logs and "Origin 'http://evil.example'" in logs
    assert token not in logs


def test_a_discovered_tool_of_a_real_mcp_server_is_called_through_the_session_pool(live_gateway, gateway_world):
    """mcp-server-time over stdio, reached by the live server's executor and session pool."""
    import sys

    from playground.mcp_servers.models import McpServer
    from playground.registry import adapter
    from playground.registry.models import Tool

    server = McpServer.objects.create(name="time", transport="stdio", command=sys.executable,
                                      args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
    Tool.objects.create(name="mcp__time__get_current_time", server=server, source=Tool.Source.MCP,
                        description="Get the current time in a specific timezone.",
                        input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]})
    adapter.reset_caches()
    profile = gateway_world["profile"]

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), gateway_world["token"]) as session:
            assert "mcp__time__get_current_time" not in names(await session.list_tools())
            found = await session.call_tool("ToolSearch", {"query": "+time current"})
            assert "mcp__time__get_current_time" in json.loads(found.content[0].text)["matches"]
            assert "mcp__time__get_current_time" in names(await session.list_tools())
            return await session.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})

    result = anyio.run(flow)
    assert not result.is_error, text_of(result)
    assert '"timezone": "UTC"' in text_of(result) or "UTC" in text_of(result)


def test_an_ask_rule_waits_for_a_persons_answer_on_the_dashboard(live_gateway, gateway_world):
    from playground.gateway.models import GatewayPrompt, GatewaySession
    from playground.gateway.service import answer_prompt
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="calculator", profile=None)
    profile = gateway_world["profile"]

    def answer_next(status: str):
        def run():
            import time

            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                prompt = GatewayPrompt.objects.filter(status="pending").first()
                if prompt is not None:
                    assert answer_prompt(prompt.pk, status)
                    return prompt
                time.sleep(0.1)
            raise AssertionError("no prompt appeared")

        return in_thread_db(run)

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), gateway_world["token"]) as session:
            await session.call_tool("ToolSearch", {"query": "select:calculator"})
            results = {}

            async def call(key):
                results[key] = await session.call_tool("calculator", {"expression": "6*7"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "allowed")
                prompt = await answer_next("allowed")
            assert prompt.tool_name == "calculator" and prompt.arguments == {"expression": "6*7"}
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "denied")
                await answer_next("denied")
            results["timeout"] = await session.call_tool("calculator", {"expression": "1"})  # nobody answers
            return results

    results = anyio.run(flow)
    assert not results["allowed"].is_error and "42" in text_of(results["allowed"])
    assert results["denied"].is_error and "denied" in text_of(results["denied"])
    assert results["timeout"].is_error and "Nobody answered" in text_of(results["timeout"])
    session = GatewaySession.objects.get(profile=profile)
    assert list(session.prompts.order_by("pk").values_list("status", flat=True)) == ["allowed", "denied", "timeout"]
    calls = [e.payload for e in session.events.filter(type="tool_call").order_by("sequence")]
    assert [(c["permission"], c["answer"], c["is_error"]) for c in calls] == [
        ("ask", "allowed", False), ("ask", "denied", True), ("ask", "timeout", True)]
    kinds = list(session.events.order_by("sequence").values_list("type", flat=True))
    assert kinds.count("permission_asked") == 3 and kinds.count("permission_answered") == 3
