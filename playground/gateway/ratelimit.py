"""Requests per token, counted in Redis so every web process behind a balancer shares the count.

A fixed window: the key names the token and the window's number (`INCR` then `EXPIRE`, one round
trip in a pipeline), so a token may send `GATEWAY_RATE_LIMIT_REQUESTS` requests per
`GATEWAY_RATE_LIMIT_WINDOW_SECONDS`; over that the endpoint answers 429 with `Retry-After` (the
seconds left in the window). Keys carry the Channels prefix, so test runs sharing a Redis never
count each other's requests.

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
        key = f"{key_prefix()}:{token_id}:{number}"
        try:
            pipe = self._client().pipeline(transaction=False)
            pipe.incr(key)
            pipe.expire(key, math.ceil(window) + 1)
            count, _ = await pipe.execute()
        except (aioredis.RedisError, OSError) as exc:
            if time.monotonic() - self._last_outage_log > OUTAGE_LOG_EVERY_SECONDS:
                self._last_outage_log = time.monotonic()
                logger.warning("MCP gateway: rate limit not checked, Redis did not answer (%s); requests are let through", exc)
            return Verdict(True)
        if count <= limit:
            return Verdict(True, count, limit)
        retry_after = max(1, math.ceil((number + 1) * window - now))
        return Verdict(False, count, limit, retry_after)
