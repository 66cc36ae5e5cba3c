"""Requests per token, counted in Redis so every web process behind a balancer shares the count.

A sliding window, counted in two fixed ones: a key per token and window number (`INCR` and
`EXPIRE` of the current window, `GET` of the previous, one round trip in a pipeline). The estimate
is the current count plus the previous window's count weighted by how much of it still lies inside
the last `GATEWAY_RATE_LIMIT_WINDOW_SECONDS`. A plain fixed window would let a client send twice the
limit across a window boundary; this one keeps any window's count at the limit give or take the
unevenness inside the previous window. Over `GATEWAY_RATE_LIMIT_REQUESTS` the endpoint answers 429
with `Retry-After`: the seconds until the estimate is under the limit again if the client waits.
A refused request is taken back out of the count, so a client that waits as told gets through. Keys carry the Channels
prefix, so test runs sharing a Redis never count each other's requests.

If Redis does not answer, requests are let through and the failure is logged (at most once a
minute): the limit protects the servers behind the gateway from a runaway client, it is not the
access control (tokens are), and a Redis outage must not take every MCP client down with it.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from django.conf import settings

logger = logging.getLogger("playground.gateway")

REDIS_TIMEOUT_SECONDS = 0.5
OUTAGE_LOG_EVERY_SECONDS = 60.0


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    count: int = 0
    limit: int = 0
    retry_after: int = 0  # whole seconds until the window ends (only when refused)


def key_prefix() -> str:
    channels = settings.CHANNEL_LAYERS.get("default", {}).get("CONFIG", {}).get("prefix") or "asgi"
    return f"{channels}:gateway-rate"


class RateLimiter:
    """One per event loop (a redis.asyncio client belongs to the loop that opened it)."""

    def __init__(self) -> None:
        self._clients: dict[asyncio.AbstractEventLoop, aioredis.Redis] = {}
        self._last_outage_log = -math.inf

    def _client(self) -> aioredis.Redis:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [known for known in self._clients if known.is_closed()]:
                self._clients.pop(old, None)
            client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT_SECONDS,
                                             socket_connect_timeout=REDIS_TIMEOUT_SECONDS)
            self._clients[loop] = client
        return client

    async def hit(self, token_id: int) -> Verdict:
        """Count one request of `token_id`; whether it stays within the limit."""
        limit = int(settings.GATEWAY_RATE_LIMIT_REQUESTS)
        window = float(settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS)
        if limit <= 0 or window <= 0:
            return Verdict(True)
        now = time.time()
        number = int(now // window)
        current, previous = f"{key_prefix()}:{token_id}:{number}", f"{key_prefix()}:{token_id}:{number - 1}"
        try:
            pipe = self._client().pipeline(transaction=False)
            pipe.incr(current)
            pipe.expire(current, math.ceil(2 * window) + 1)  # it is the next window's "previous"
            pipe.get(previous)
            count, _, before = await pipe.execute()
        except (aioredis.RedisError, OSError) as exc:
            if time.monotonic() - self._last_outage_log > OUTAGE_LOG_EVERY_SECONDS:
                self._last_outage_log = time.monotonic()
                logger.warning("MCP gateway: rate limit not checked, Redis did not answer (%s); requests are let through", exc)
            return Verdict(True)
        elapsed = now - number * window
        estimate = sliding_estimate(int(before or 0), int(count), elapsed, window)
        if estimate <= limit:
            return Verdict(True, math.ceil(estimate), limit)
        try:
            await self._client().decr(current)
        except (aioredis.RedisError, OSError):
            pass  # the count stays one high until the window ends: errs on the safe side
        count -= 1
        return Verdict(False, math.ceil(estimate), limit, retry_after(int(before or 0), int(count), elapsed, window, limit))


def sliding_estimate(previous: int, current: int, elapsed: float, window: float) -> float:
    """Requests in the last `window` seconds, the previous window's assumed spread evenly."""
    return previous * (1 - elapsed / window) + current


def retry_after(previous: int, current: int, elapsed: float, window: float, limit: int) -> int:
    """Whole seconds until one more request would be allowed, if none is sent meanwhile."""
    room = limit - 1  # the estimate must reach this for the next request to fit
    if current <= room and previous > 0:
        # Within this window the previous one's share fades until it leaves room.
        wait = window * (1 - (room - current) / previous) - elapsed
    else:
        # Only in the next window, as this window's count fades in turn.
        wait = (window - elapsed) + (window * (1 - room / current) if current > 0 else 0.0)
    return max(1, math.ceil(wait - 1e-9))  # no extra second from float rounding
