"""What a token holder can send the gateway, served by Daphne: nothing stalls it, breaks a save or
comes back as database or stack text (issue 32)."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import anyio
from hypothesis import strategies as st
import pytest

from tests.gateway.test_live_client import connect, raw_request, text_of, wait_for_event
from tests.polling import wait_until

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


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


def test_a_nan_request_id_is_refused_not_taken_for_a_notification(live_gateway, gateway_world):
    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    auth = {"Authorization": f"Bearer {token}"}
    for body in (b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', b'{"jsonrpc": "2.0", "id": Infinity, "method": "ping"}',
                 b'{"jsonrpc": "2.0", "id": 1' + b"0" * 80 + b', "method": "ping"}', b"[" * 100 + b"]" * 100, b"\xff\xfe"):
        status, _, text = post(url, body, auth)
        assert status == 400, (body[:40], status, text)
        answer = json.loads(text)
        assert answer["error"]["code"] == -32700 and answer["error"]["message"].startswith("Parse error")
    status, _, _ = post(url, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ok", "version": "1"}}}).encode(), auth)
    assert status == 200


def test_failed_token_checks_are_limited_per_address_and_their_log_sampled(live_gateway, gateway_world):
    from playground.gateway.auth_guard import LOGGED_FAILURES

    url = live_gateway.endpoint(gateway_world["profile"].pk)
    limit = 20  # the live server's GATEWAY_AUTH_FAILURE_LIMIT (the default)
    before = live_gateway.logs().count("MCP gateway refused")
    statuses = [post(url, b"{}", {"Authorization": f"Bearer tsg_wrong{i}"})[0] for i in range(limit + 30)]
    assert statuses[:limit] == [401] * limit
    assert set(statuses[limit:]) == {429}
    status, headers, text = post(url, b"{}", {"Authorization": "Bearer tsg_wrong"})
    assert status == 429 and int(headers["Retry-After"]) >= 1 and "Too many failed token checks" in text
    # A valid token from the same address still gets in: one client guessing cannot lock the others out.
    assert post(url, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ok", "version": "1"}}}).encode(),
        {"Authorization": f"Bearer {gateway_world['token']}"})[0] == 200
    wait_until(lambda: "reached 20 failed token checks" in live_gateway.logs(), "the limit's log line", 5)
    logged = live_gateway.logs().count("MCP gateway refused") - before
    assert logged == LOGGED_FAILURES  # not one line per request


def test_long_urls_are_answered_414_with_a_message_and_query_strings_stay_out_of_the_access_log(live_gateway):
    import socket

    host, port = live_gateway.url.removeprefix("http://").split(":")
    for size in (9_000, 12_000, 20_000, 70_000):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"GET /healthz?q=" + b"a" * size + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + b"c" * 6000 + b"\r\n\r\n")
            answer = b""
            while b"URI too long" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 414"), (size, answer[:200])
        assert b"URI too long" in answer
    secret_query = "findme-query-5150"
    with urllib.request.urlopen(f"{live_gateway.url}/healthz?q={secret_query}", timeout=10) as response:
        assert response.status == 200
    wait_until(lambda: '"GET /healthz" 200' in live_gateway.logs(), "the access log line", 5)
    assert secret_query not in live_gateway.logs()


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**20), max_value=10**20), st.floats(allow_nan=False),
              st.text(max_size=30), st.sampled_from(["\u0000", "select:calculator", "((9**999)**999)**9", "x" * 5000])),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=12,
)
_messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
     "method": st.sampled_from(["tools/list", "tools/call", "ping", "initialize", "resources/list", "nope", ""]),
     "id": st.one_of(st.integers(min_value=-5, max_value=10**6), st.text(max_size=8), st.none())},
    optional={"params": st.one_of(_json_values, st.fixed_dictionaries(
        {"name": st.sampled_from(["echo", "calculator", "ToolSearch", "CallDiscoveredTool", "word_count", "mcp__weather__get_forecast", "\u0000"]),
         "arguments": _json_values}))},
)


def test_fuzzed_json_rpc_messages_never_get_a_server_error(live_gateway, gateway_world):
    """0 × 5xx and no database or stack text, whatever JSON-RPC a token holder sends in a session."""
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hypothesis_settings

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)
    auth = {"Authorization": f"Bearer {token}"}
    _, headers, _ = post(url, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}).encode(), auth)
    session = {**auth, "Mcp-Session-Id": headers["mcp-session-id"] if "mcp-session-id" in headers else headers["Mcp-Session-Id"],
               "MCP-Protocol-Version": "2025-06-18"}
    post(url, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), session)

    @hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(message=_messages, batch=st.booleans())
    def check(message, batch):
        body = json.dumps([message] if batch else message).encode()
        status, _, text = post(url, body, session)
        assert status < 500, (status, body[:200], text[:300])
        assert_no_leak(text)

    check()
    assert "Unexpected error" not in live_gateway.logs() and "unexpected error" not in live_gateway.logs()
