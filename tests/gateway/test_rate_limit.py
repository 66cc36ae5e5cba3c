"""Requests per token, counted in Redis: over the limit a 429 with Retry-After and a JSON-RPC error
the SDK client surfaces; every refusal is logged with the token's row and prefix, never the secret."""
from __future__ import annotations

import asyncio
import json
import logging
import os

import anyio
import pytest
import redis
from mcp.shared.exceptions import MCPError

from playground.gateway.endpoint import RATE_LIMITED, GatewayEndpoint
from limits import RateLimitItemPerSecond

from playground.gateway.ratelimit import RateLimiter, key_prefix

pytestmark = pytest.mark.django_db(transaction=True)


def call(endpoint: GatewayEndpoint, profile_id: int, headers: dict[str, str]) -> tuple[int, dict[str, str], dict]:
    """One POST through the endpoint in this process; (status, headers, JSON body)."""
    scope = {
        "type": "http", "method": "POST", "path": f"/gateway/mcp/{profile_id}/", "client": ("127.0.0.1", 5555),
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1", **headers}.items()],
    }
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(endpoint(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, json.loads(body or b"{}")


def window_keys(token_id: int, limit: int, window: int) -> tuple[str, str]:
    """(current, previous) Redis keys of a token's sliding window, as the `limits` package names them
    (what another web process counting this token would have written)."""
    current = f"{key_prefix()}:{{{RateLimitItemPerSecond(limit, window).key_for(str(token_id))}}}"
    return current, f"{current}/-1"


# A stateless (2026-07-28) request whose body `{}` is no JSON-RPC message: past the rate limit, the
# SDK's stateless entry answers 400 at once (no session, nothing recorded).
SESSIONLESS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def test_a_token_over_its_limit_gets_429_with_retry_after_and_a_json_rpc_error(gateway_world, settings, caplog):
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 2
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 3600
    profile, token, row = gateway_world["profile"], gateway_world["token"], gateway_world["token_row"]
    endpoint = GatewayEndpoint()
    auth = {"Authorization": f"Bearer {token}", **SESSIONLESS}
    with caplog.at_level(logging.WARNING, logger="playground.gateway"):
        assert [call(endpoint, profile.pk, auth)[0] for _ in range(2)] == [400, 400]
        status, headers, body = call(endpoint, profile.pk, auth)
    assert status == 429
    # This window's requests fade out over the next one, so the wait may reach past this window.
    assert 1 <= int(headers["retry-after"]) <= 2 * 3600
    assert headers["content-type"] == "application/json"
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == RATE_LIMITED
    assert body["error"]["data"]["retry_after_seconds"] == int(headers["retry-after"])
    assert "Retry after" in body["error"]["message"]
    refusal = [r.getMessage() for r in caplog.records if "rate limit" in r.getMessage()]
    assert len(refusal) == 1 and f"token #{row.pk}" in refusal[0] and row.prefix in refusal[0]
    assert token not in caplog.text

    # Per token: the other profile's token still passes (its own count).
    other = {"Authorization": f"Bearer {gateway_world['other_token']}", **SESSIONLESS}
    assert call(endpoint, gateway_world["other"].pk, other)[0] == 400


def test_the_count_is_shared_through_redis_by_every_process(gateway_world, settings):
    """Another web process counted first (here: another limiter, with its own Redis client and loop)."""
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 5
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 3600
    row = gateway_world["token_row"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        elsewhere = RateLimiter()
        assert all(asyncio.run(elsewhere.hit(row.pk)).allowed for _ in range(5))
        status, _, _ = call(GatewayEndpoint(), gateway_world["profile"].pk,
                            {"Authorization": f"Bearer {gateway_world['token']}", **SESSIONLESS})
        assert status == 429
    finally:
        client.delete(*window_keys(row.pk, 5, 3600))
        client.close()


def test_waiting_as_told_lets_the_next_request_through(settings):
    """Time is moved on by taking the told seconds off the window keys' time to live, as waiting would."""
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 3
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 60
    token_id = 10**9 + os.getpid()  # no token row needed: the limiter counts ids
    limiter = RateLimiter()
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = window_keys(token_id, 3, 60)

    def wait(seconds: float) -> None:
        for key in keys:
            ttl = client.pttl(key)
            if ttl > 0:
                client.pexpire(key, max(1, ttl - int(seconds * 1000)))

    try:
        assert [asyncio.run(limiter.hit(token_id)).allowed for _ in range(3)] == [True, True, True]
        refused = asyncio.run(limiter.hit(token_id))
        assert not refused.allowed and 1 <= refused.retry_after <= 2 * 60
        wait(refused.retry_after)
        assert asyncio.run(limiter.hit(token_id)).allowed
        # Refused again at once, told to wait again, and let through after that wait.
        again = asyncio.run(limiter.hit(token_id))
        assert not again.allowed and again.retry_after >= 1
        wait(again.retry_after)
        assert asyncio.run(limiter.hit(token_id)).allowed
    finally:
        client.delete(*keys)
        client.close()


def test_zero_turns_the_limit_off_and_an_absent_redis_lets_requests_through(settings, caplog):
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 0
    assert asyncio.run(RateLimiter().hit(1)).allowed
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 1
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    limiter = RateLimiter()
    with caplog.at_level(logging.WARNING, logger="playground.gateway"):
        assert asyncio.run(limiter.hit(1)).allowed and asyncio.run(limiter.hit(1)).allowed
    assert sum("rate limit not checked" in r.getMessage() for r in caplog.records) == 1  # once, not per request


def test_every_refusal_names_the_token_never_its_secret(gateway_world, settings, caplog):
    profile, token, row = gateway_world["profile"], gateway_world["token"], gateway_world["token_row"]
    endpoint = GatewayEndpoint()
    with caplog.at_level(logging.WARNING, logger="playground.gateway"):
        assert call(endpoint, profile.pk, {"Authorization": f"Bearer {token}", "Origin": "http://evil.example"})[0] == 403
        assert call(endpoint, profile.pk, {"Authorization": f"Bearer {token}", "Host": "evil.example"})[0] == 403
        assert call(endpoint, profile.pk, {"Authorization": "Bearer tsg_wrongwrongwrong"})[0] == 401
        assert call(endpoint, profile.pk, {"Authorization": "Bearer ghp_someone_elses_secret"})[0] == 401
        assert call(endpoint, gateway_world["other"].pk, {"Authorization": f"Bearer {token}"})[0] == 401
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 5
    assert all(f"token #{row.pk}" in line and row.prefix in line for line in (lines[0], lines[1], lines[4])), lines
    assert "unknown token (tsg_wrongw…)" in lines[2] and "not a gateway token" in lines[3]
    assert token not in caplog.text and "someone_elses_secret" not in caplog.text


def test_the_sdk_client_surfaces_the_rate_limit_error(live_gateway, gateway_world):
    """The live server counts in the same Redis under the same prefix: fill this token's window
    there, and the client's next request is refused with an error it raises as MCPError."""
    from tests.gateway.test_live_client import connect

    row = gateway_world["token_row"]
    client = redis.Redis.from_url(__import__("django.conf").conf.settings.REDIS_URL)
    keys = window_keys(row.pk, 600, 60)  # the live server's default limit and window

    async def flow():
        async with connect(live_gateway.endpoint(gateway_world["profile"].pk), gateway_world["token"]) as session:
            client.set(keys[0], 10**6, px=120_000)  # the current window, as the library sets it (twice the window)
            with pytest.raises(MCPError) as refused:
                await session.list_tools()
            return refused.value

    try:
        error = anyio.run(flow)
    finally:
        client.delete(*keys)
        client.close()
    assert error.error.code == RATE_LIMITED and "Too many requests" in error.error.message
    assert f"token #{row.pk}" in live_gateway.logs() and "rate limit" in live_gateway.logs()


def test_a_burst_across_the_boundary_is_refused(gateway_world, settings):
    """The previous window's requests (written straight into Redis, as another process would)
    still count just after the boundary."""
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 5
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 3600
    row = gateway_world["token_row"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    current, previous = window_keys(row.pk, 5, 3600)
    try:
        # The previous window ended a second ago: nearly all of its 6 requests still count.
        client.set(previous, 6, px=3_599_000)
        status, headers, _ = call(GatewayEndpoint(), gateway_world["profile"].pk,
                                  {"Authorization": f"Bearer {gateway_world['token']}", **SESSIONLESS})
        assert status == 429 and int(headers["retry-after"]) >= 1
    finally:
        client.delete(previous, current)
        client.close()
