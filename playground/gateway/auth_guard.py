"""Failed token checks, counted per client address: a limit against guessing, and a sampled log.

Every request without a valid token for its profile counts one failure for its address (in Redis,
with the `limits` package's sliding window counter, so every web process shares the count). Over
`GATEWAY_AUTH_FAILURE_LIMIT` failures per `GATEWAY_AUTH_FAILURE_WINDOW_SECONDS`, the address's
failed requests get 429 with `Retry-After` instead of 401, until the window has room again. A
valid token still passes: clients behind one proxy share an address, and one of them guessing must
not lock the others out (tokens are 256 random bits; the limit is against noise and load).

The log is sampled per address, kind of failure (no token, malformed, unknown, revoked, another
profile's) and window: the first `LOGGED_FAILURES` of each kind are logged with their reason, then
one line when the address reaches the limit; repeats are counted, not logged, until the window
moves on. A client hammering with a wrong token no longer writes one WARNING per request.

If Redis does not answer, requests are checked as usual (the token decides), every failure is
logged, and the outage once a minute.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from limits import RateLimitItemPerSecond
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from playground.gateway.ratelimit import LoopLimiters, channels_key_prefix

logger = logging.getLogger("playground.gateway")

LOGGED_FAILURES = 3  # of each kind, per address and window
OUTAGE_LOG_EVERY_SECONDS = 60.0
NAMESPACE = "gateway-auth-failures"
LOG_NAMESPACE = "gateway-auth-failures-logged"
FAILURE_KINDS = ("no bearer token", "malformed", "unknown token", "revoked", "another profile")


def failure_kind(reason: str) -> str:
    """The kind of a failed token check, from its logged reason (which names tokens and rows)."""
    return next((kind for kind in FAILURE_KINDS if kind in reason), "other")


@dataclass(frozen=True)
class AuthVerdict:
    allowed: bool
    failures: int = 0
    limit: int = 0
    retry_after: int = 0


def _item(namespace: str = NAMESPACE, amount: int | None = None) -> RateLimitItemPerSecond | None:
    limit = int(settings.GATEWAY_AUTH_FAILURE_LIMIT)
    window = int(settings.GATEWAY_AUTH_FAILURE_WINDOW_SECONDS)
    if limit <= 0 or window <= 0:
        return None
    return RateLimitItemPerSecond(amount or limit, window, namespace=namespace)


def key_prefix() -> str:
    return channels_key_prefix("limits")


class FailedAuthGuard:
    """One per process; a limiter (its Redis client) per event loop."""

    def __init__(self) -> None:
        self._limiters = LoopLimiters(key_prefix)
        self._last_outage_log = -math.inf

    def _limiter(self) -> SlidingWindowCounterRateLimiter:
        return self._limiters.current()

    def _outage(self, exc: Exception) -> None:
        if time.monotonic() - self._last_outage_log > OUTAGE_LOG_EVERY_SECONDS:
            self._last_outage_log = time.monotonic()
            logger.warning("MCP gateway: failed-auth limit not checked, Redis did not answer (%s)", exc)

    async def check(self, address: str) -> AuthVerdict:
        """Before the token is looked up: may this address try again now?"""
        item = _item()
        if item is None:
            return AuthVerdict(True)
        try:
            limiter = self._limiter()
            if await limiter.test(item, address):
                return AuthVerdict(True, limit=item.amount)
            stats = await limiter.get_window_stats(item, address)
        except Exception as exc:  # noqa: BLE001 - limits wraps every storage error (wrap_exceptions); logged, let through
            self._outage(exc)
            return AuthVerdict(True)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        return AuthVerdict(False, item.amount, item.amount, retry_after)

    async def failed(self, address: str, reason: str) -> tuple[int, bool, bool]:
        """Count one failure of `address`: (failures in the window so far, whether to log this one,
        whether this one used up the address's limit)."""
        item, logged = _item(), _item(LOG_NAMESPACE, LOGGED_FAILURES)
        if item is None or logged is None:
            return 0, True, False
        try:
            limiter = self._limiter()
            await limiter.hit(item, address)
            reached = not await limiter.test(item, address)
            stats = await limiter.get_window_stats(item, address)
            log_it = await limiter.hit(logged, address, failure_kind(reason))
        except Exception as exc:  # noqa: BLE001 - limits wraps every storage error (wrap_exceptions); logged, let through
            self._outage(exc)
            return 0, True, False
        return item.amount - stats.remaining, log_it, reached
