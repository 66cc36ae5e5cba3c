"""Requests per token, counted in Redis so every web process behind a balancer shares the count.

The `limits` package's sliding window counter (`SlidingWindowCounterRateLimiter` on its async Redis
storage): the count of the current fixed window plus the previous window's count weighted by how much
of it still lies inside the last `GATEWAY_RATE_LIMIT_WINDOW_SECONDS`, checked and counted in one Lua
script (a refused request is not counted, so a client that waits as told gets through). A plain fixed
window would let a client send twice the limit across a window boundary; this one does not. Over
`GATEWAY_RATE_LIMIT_REQUESTS` the endpoint answers 429 with `Retry-After`: the seconds until the
library's estimate leaves room for one more request. Keys carry the Channels prefix, so test runs
sharing a Redis never count each other's requests.

If Redis does not answer, requests are let through and the failure is logged (at most once a
minute): the limit protects the servers behind the gateway from a runaway client, it is not the
access control (tokens are), and a Redis outage must not take every MCP client down with it.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from limits import RateLimitItemPerSecond
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError
from redis.exceptions import RedisError

logger = logging.getLogger("playground.gateway")

REDIS_TIMEOUT_SECONDS = 0.5
OUTAGE_LOG_EVERY_SECONDS = 60.0


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    count: int = 0
    limit: int = 0
    retry_after: int = 0  # whole seconds until one more request fits (only when refused)


def channels_key_prefix(name: str) -> str:
    """Redis keys under the Channels prefix, so test runs sharing a Redis never count each other's."""
    channels = settings.CHANNEL_LAYERS.get("default", {}).get("CONFIG", {}).get("prefix") or "asgi"
    return f"{channels}:{name}"


def key_prefix() -> str:
    return channels_key_prefix("gateway-rate")


def storage_uri(redis_url: str) -> str:
    """`limits`' name for the same server: its async storages take `async+redis://…`."""
    return f"async+{redis_url}"


class LoopLimiters:
    """A sliding-window limiter on Redis per event loop (an asyncio Redis client belongs to the loop
    that opened it); the gateway's request limit and its failed-auth guard each keep one."""

    def __init__(self, key_prefix: Callable[[], str]) -> None:
        self._key_prefix = key_prefix
        self._limiters: dict[asyncio.AbstractEventLoop, SlidingWindowCounterRateLimiter] = {}

    def current(self) -> SlidingWindowCounterRateLimiter:
        loop = asyncio.get_running_loop()
        limiter = self._limiters.get(loop)
        if limiter is None:
            for old in [known for known in self._limiters if known.is_closed()]:
                self._limiters.pop(old, None)
            storage = RedisStorage(storage_uri(settings.REDIS_URL), implementation="redispy", wrap_exceptions=True,
                                   key_prefix=self._key_prefix(), socket_timeout=REDIS_TIMEOUT_SECONDS,
                                   socket_connect_timeout=REDIS_TIMEOUT_SECONDS)
            limiter = self._limiters[loop] = SlidingWindowCounterRateLimiter(storage)
        return limiter


class RateLimiter:
    """Requests per token; one per process."""

    def __init__(self) -> None:
        self._limiters = LoopLimiters(key_prefix)
        self._last_outage_log = -math.inf

    def _limiter(self) -> SlidingWindowCounterRateLimiter:
        return self._limiters.current()

    async def hit(self, token_id: int) -> Verdict:
        """Count one request of `token_id`; whether it stays within the limit."""
        limit = int(settings.GATEWAY_RATE_LIMIT_REQUESTS)
        window = float(settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS)
        if limit <= 0 or window <= 0:
            return Verdict(True)
        item = RateLimitItemPerSecond(limit, max(1, round(window)))
        try:
            limiter = self._limiter()
            if await limiter.hit(item, str(token_id)):
                return Verdict(True, limit=limit)
            stats = await limiter.get_window_stats(item, str(token_id))
        except (StorageError, RedisError, OSError) as exc:
            if time.monotonic() - self._last_outage_log > OUTAGE_LOG_EVERY_SECONDS:
                self._last_outage_log = time.monotonic()
                logger.warning("MCP gateway: rate limit not checked, Redis did not answer (%s); requests are let through", exc)
            return Verdict(True)
        retry_after = max(1, math.ceil(stats.reset_time - time.time() - 1e-9))  # no extra second from rounding
        return Verdict(False, limit - stats.remaining, limit, retry_after)
