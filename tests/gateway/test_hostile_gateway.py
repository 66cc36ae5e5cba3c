"""What a token holder can send the gateway, served by Daphne: nothing stalls it, breaks a save or
comes back as database or stack text (issue 32)."""
from __future__ import annotations

import json
import threading
import time
import urllib.request

import anyio
import pytest

from tests.gateway.test_live_client import connect, raw_request, text_of, wait_for_event

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# What a leaked database or Python error looks like on the wire.
LEAK_MARKERS = ("INSERT", "psycopg", "Traceback", "DataError", "unsupported Unicode escape", "jsonb", "NUL (0x00)")


def assert_no_leak(text: str) -> None:
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{marker!r} leaked: {text[:300]}"


def test_a_json_escaped_nul_is_stored_escaped_and_answered_normally(live_gateway, gateway_world):
    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nul\u0000client", "version": "1\u0000"}}}
    request = urllib.request.Request(url, data=json.dumps(initialize).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        session_id = response.headers["Mcp-Session-Id"]
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}
    raw_request(url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})

    status, messages = raw_request(url, headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "before\u0000after", "extra\u0000key": ["\u0000"]}}})
    assert status == 200
    answer = next(m for m in messages if m.get("id") == 2)
    assert_no_leak(json.dumps(answer))
    status, messages = raw_request(url, headers, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "ToolSearch", "arguments": {"query": "count\u0000words"}}})
    search = next(m for m in messages if m.get("id") == 3)
    assert_no_leak(json.dumps(search))
    assert "result" in search

    session = GatewaySession.objects.get(session_id=session_id)
    assert session.client_name == "nul\\u0000client"  # what the client sent, shown escaped
    wait_for_event(session, "tool_search")
    call = session.events.get(type="tool_call").payload
    assert call["arguments"] == {"text": "before\\u0000after", "extra\\u0000key": ["\\u0000"]}
    assert session.events.get(type="tool_search").payload["query"] == "count\\u0000words"
    assert_no_leak(live_gateway.logs())


def test_nested_powers_are_refused_fast_and_the_web_server_stays_responsive(live_gateway, gateway_world):
    from playground.runner.health import healthz_status

    profile, token = gateway_world["profile"], gateway_world["token"]
    health_times: list[float] = []
    stop = threading.Event()

    def watch_health():
        while not stop.is_set():
            started = time.perf_counter()
            healthz_status(live_gateway.url, timeout=10)
            health_times.append(time.perf_counter() - started)

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token) as session:
            await session.call_tool("ToolSearch", {"query": "select:calculator"})
            answers = []
            for expression in ("((9**999)**999)**9", "((9**999)**999)**99", "round(5, -10**8)", "9**999*9**999*9**999"):
                started = time.perf_counter()
                result = await session.call_tool("calculator", {"expression": expression})
                answers.append((result, time.perf_counter() - started))
            return answers

    watcher = threading.Thread(target=watch_health, daemon=True)
    watcher.start()
    try:
        answers = anyio.run(flow)
    finally:
        stop.set()
        watcher.join(15)
    for result, seconds in answers:
        assert result.is_error and ("too large" in text_of(result) or "at most" in text_of(result)), text_of(result)
        assert seconds < 2.0
    assert health_times and max(health_times) < 2.0
