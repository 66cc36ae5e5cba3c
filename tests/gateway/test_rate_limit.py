"""Requests per token, counted in Redis: over the limit a 429 with Retry-After and a JSON-RPC error
the SDK client surfaces; every refusal is logged with the token's row and prefix, never the secret."""
from __future__ import annotations

import asyncio
import json
import logging
import time

import anyio
import pytest
import redis
from mcp.shared.exceptions import MCPError

from playground.gateway.endpoint import RATE_LIMITED, GatewayEndpoint
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


# The sessionless protocol version is refused right after the rate limit is counted: requests that
# pass the limit end there (400) without starting the SDK's session manager.
SESSIONLESS = {"MCP-Protocol-Version": "2026-07-28"}


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
    """Another web process counted first (here: the key written straight into Redis)."""
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 5
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 3600
    row = gateway_world["token_row"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    number = int(time.time() // 3600)
    keys = [f"{key_prefix()}:{row.pk}:{n}" for n in (number, number + 1)]
    try:
        for key in keys:
            client.set(key, 5, ex=60)
        status, _, _ = call(GatewayEndpoint(), gateway_world["profile"].pk,
                            {"Authorization": f"Bearer {gateway_world['token']}", **SESSIONLESS})
        assert status == 429
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
    window = 60  # the live server's default window
    number = int(time.time() // window)
    keys = [f"{key_prefix()}:{row.pk}:{n}" for n in (number, number + 1)]

    async def flow():
        async with connect(live_gateway.endpoint(gateway_world["profile"].pk), gateway_world["token"]) as session:
            for key in keys:
                client.set(key, 10**6, ex=120)
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


def test_the_window_slides_so_a_boundary_does_not_double_the_limit():
    """A fixed window would allow `limit` just before its end and `limit` again just after."""
    from playground.gateway.ratelimit import retry_after, sliding_estimate
    # 10 requests late in the previous 60 s window; 1 s into the new one nearly all still count.
    assert sliding_estimate(10, 1, elapsed=1, window=60) > 10
    # Halfway through, half of the previous window's count remains.
    assert sliding_estimate(10, 3, elapsed=30, window=60) == pytest.approx(8.0)
    # Waiting as told makes the next request fit.
    wait = retry_after(10, 2, elapsed=1, window=60, limit=10)
    assert sliding_estimate(10, 2, elapsed=1 + wait, window=60) + 1 <= 10 + 1e-9
    assert sliding_estimate(10, 2, elapsed=wait, window=60) + 1 > 10  # one second less would not
    # Over the limit inside this window alone: the wait runs into the next window.
    wait = retry_after(0, 12, elapsed=10, window=60, limit=10)
    assert wait > 50
    assert sliding_estimate(12, 0, elapsed=wait - 50, window=60) + 1 <= 10 + 1e-9


def test_a_burst_across_the_boundary_is_refused(gateway_world, settings):
    """The previous window's requests (written straight into Redis, as another process would)
    still count just after the boundary."""
    settings.GATEWAY_RATE_LIMIT_REQUESTS = 5
    settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS = 3600
    row = gateway_world["token_row"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    number = int(time.time() // 3600)
    previous = f"{key_prefix()}:{row.pk}:{number - 1}"
    current = f"{key_prefix()}:{row.pk}:{number}"
    elapsed_share = (time.time() % 3600) / 3600
    try:
        # Enough in the previous window that its remaining share alone fills the limit.
        client.set(previous, int(5 / max(1e-3, 1 - elapsed_share)) + 2, ex=60)
        status, headers, _ = call(GatewayEndpoint(), gateway_world["profile"].pk,
                                  {"Authorization": f"Bearer {gateway_world['token']}", **SESSIONLESS})
        assert status == 429 and int(headers["retry-after"]) >= 1
    finally:
        client.delete(previous, current)
        client.close()
