"""The HTTP side of the gateway: `/gateway/mcp/<profile id>/` in the project's ASGI application.

Every request is checked before the MCP SDK sees it: the Host header against ALLOWED_HOSTS and a
browser's Origin against GATEWAY_ALLOWED_ORIGINS (the MCP spec asks servers to validate Origin
against DNS rebinding), then the bearer token against the profile's live tokens, then the token's
rate limit (ratelimit.py). A refusal is answered with 403, 401 or 429 and logged with the reason
and the token's row and prefix, never with the token.

The SDK's session manager needs a task group that outlives single requests (sessions' server
tasks run in it). Daphne, which `make run` starts, never runs the ASGI lifespan protocol, so the
manager is started lazily: the first request creates a long-lived task on the server's event loop
that enters `manager.run()` and stays inside it. A manager belongs to one event loop; a request
on another loop (tests that run several) gets a fresh one. The manager is the SDK's, able to take
over a session another process opened (manager.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from playground.engine import safe_json
from playground.gateway.auth_guard import FailedAuthGuard
from playground.gateway.manager import ResumingSessionManager
from playground.gateway.ratelimit import RateLimiter
from playground.gateway.server import SCOPE_KEY, build_server, in_thread, record_session_closed
from playground.gateway.tokens import authenticate, describe, identify
from playground.gateway.transcript import exchange_for

logger = logging.getLogger("playground.gateway")

PATH_PREFIX = "/gateway/mcp/"
_PATH = re.compile(r"^/gateway/mcp/(?P<profile_id>[0-9]{1,12})/?$")


def endpoint_path(profile_id: int) -> str:
    return f"{PATH_PREFIX}{profile_id}/"


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    """Exact match, or `scheme://host:*` for any port of that host."""
    origin = origin.rstrip("/")
    for pattern in allowed:
        pattern = pattern.rstrip("/")
        if pattern == "*" or pattern == origin:
            return True
        if pattern.endswith(":*") and origin.startswith(pattern[:-1]) and origin[len(pattern) - 1:].isdigit():
            return True
    return False


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


# JSON-RPC error codes of refusals: the SDK's own for a bad request; the one MCP servers commonly
# use for "rate limited" (implementation-defined range), with the wait in `data`.
INVALID_REQUEST = -32600
RATE_LIMITED = -32029


async def _respond(send, status: int, message: str, extra_headers: list[tuple[bytes, bytes]] = (), *,
                   code: int | None = None, data: dict[str, Any] | None = None) -> None:
    error: dict[str, Any] = {"code": code if code is not None else (INVALID_REQUEST if status < 500 else -32603), "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


MAX_BODY_BYTES = 4 * 1024 * 1024
PARSE_ERROR = -32700


async def _checked_body(receive, send):
    """Read a POST's body and check it is JSON within the limits people's JSON gets everywhere
    (safe_json: no NaN or Infinity — a JSON-RPC id of NaN would pass as a notification —, no
    integer of 65+ digits, 64 levels at most), at most MAX_BODY_BYTES. A `receive` that hands the
    SDK the same body, or None when the request was answered here (400 / 413)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY_BYTES:
            await _respond(send, 413, f"Request body over {MAX_BODY_BYTES // (1024 * 1024)} MB")
            return None
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    try:
        safe_json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        await _respond(send, 400, f"Parse error: {reason}", code=PARSE_ERROR)
        return None
    delivered = False

    async def replay():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    replay.body = body  # the Protocol view notes it (transcript.py)
    return replay


class GatewayEndpoint:
    """The ASGI application behind `/gateway/mcp/<profile id>/`."""

    def __init__(self) -> None:
        self.server = build_server()
        self._manager: ResumingSessionManager | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._holder: asyncio.Task | None = None
        self.rate_limiter = RateLimiter()
        self.auth_guard = FailedAuthGuard()

    async def manager(self) -> ResumingSessionManager:
        loop = asyncio.get_running_loop()
        if self._manager is not None and self._loop is loop and self._holder is not None and not self._holder.done():
            return self._manager
        if self._loop is not loop or self._lock is None:
            self._loop, self._lock, self._manager, self._holder = loop, asyncio.Lock(), None, None
        async with self._lock:
            if self._manager is not None and self._holder is not None and not self._holder.done():
                return self._manager
            manager = ResumingSessionManager(
                app=self.server, session_idle_timeout=settings.GATEWAY_SESSION_IDLE_SECONDS,
            )
            started = asyncio.Event()

            async def hold() -> None:
                try:
                    async with manager.run():
                        started.set()
                        await asyncio.Event().wait()  # until the process ends (or the task is cancelled)
                finally:
                    started.set()

            # Created from no request's context: the task must outlive the request that started it.
            holder = loop.create_task(hold(), name="mcp-gateway-session-manager")
            await started.wait()
            if holder.done():
                holder.result()  # raises what stopped it
            self._manager, self._holder = manager, holder
            logger.info("MCP gateway: session manager started")
            return manager

    async def _refuse_token(self, send, client: str, refuse, reason: str) -> None:
        """401 for a failed token check, counted for the client's address; past the address's limit,
        429 instead. Only the first few failures of each kind per address and window are logged (auth_guard)."""
        verdict = await self.auth_guard.check(client)
        if not verdict.allowed:
            await _respond(send, 429, f"Too many failed token checks from this address: at most {verdict.limit} per "
                           f"{settings.GATEWAY_AUTH_FAILURE_WINDOW_SECONDS:g} s. Retry after {verdict.retry_after} s.",
                           [(b"retry-after", str(verdict.retry_after).encode())], code=RATE_LIMITED,
                           data={"retry_after_seconds": verdict.retry_after, "limit": verdict.limit})
            return
        failures, log_it, reached = await self.auth_guard.failed(client, reason)
        if log_it:
            refuse(reason, "token check failed")
        if reached:
            logger.warning("MCP gateway: %s reached %s failed token checks within %g s; its further failures are "
                           "answered 429 and not logged until the window has room", client, failures,
                           settings.GATEWAY_AUTH_FAILURE_WINDOW_SECONDS)
        await _respond(send, 401, "Unauthorized: a valid bearer token for this profile is required",
                       [(b"www-authenticate", b'Bearer realm="toolsearch-gateway"')])

    async def __call__(self, scope, receive, send) -> None:
        match = _PATH.match(scope.get("path", ""))
        if scope["type"] != "http" or match is None:
            await _respond(send, 404, "Not found: the gateway serves /gateway/mcp/<profile id>/")
            return
        profile_id = int(match.group("profile_id"))
        headers = _headers(scope)
        client = (scope.get("client") or ("?", 0))[0]

        def refuse(reason: str, who: str) -> None:
            # Every refusal, with whose token it was (row, name, shown prefix), never the token.
            logger.warning("MCP gateway refused %s %s from %s (%s): %s",
                           scope.get("method"), scope.get("path"), client, who, reason)

        host, _port = split_domain_port(headers.get("host", ""))
        if not host or not validate_host(host, settings.ALLOWED_HOSTS):
            refuse(f"Host {headers.get('host', '')!r} is not in ALLOWED_HOSTS", await in_thread(identify)(headers.get("authorization")))
            await _respond(send, 403, "Forbidden: Host not allowed")
            return
        origin = headers.get("origin")
        if origin and not origin_allowed(origin, settings.GATEWAY_ALLOWED_ORIGINS):
            refuse(f"Origin {origin!r} is not in GATEWAY_ALLOWED_ORIGINS", await in_thread(identify)(headers.get("authorization")))
            await _respond(send, 403, "Forbidden: Origin not allowed")
            return
        token, why = await in_thread(authenticate)(profile_id, headers.get("authorization"))
        if token is None:
            await self._refuse_token(send, client, refuse, f"profile {profile_id}: {why}")
            return
        verdict = await self.rate_limiter.hit(token.pk)
        if not verdict.allowed:
            refuse(f"rate limit: {verdict.count} requests in the current window of "
                   f"{settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS:g} s (limit {verdict.limit})", describe(token))
            await _respond(
                send, 429, f"Too many requests for this token: at most {verdict.limit} per "
                f"{settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS:g} s. Retry after {verdict.retry_after} s.",
                [(b"retry-after", str(verdict.retry_after).encode())],
                code=RATE_LIMITED, data={"retry_after_seconds": verdict.retry_after, "limit": verdict.limit,
                                         "window_seconds": settings.GATEWAY_RATE_LIMIT_WINDOW_SECONDS},
            )
            return
        exchange = exchange_for(profile_id, token.pk, headers)
        if scope.get("method") == "POST":
            receive = await _checked_body(receive, send)
            if receive is None:
                return
            if exchange is not None:
                exchange.request_body(receive.body)
        if exchange is not None:
            send = exchange.watch(send)
        scope = dict(scope)
        scope[SCOPE_KEY] = {"profile_id": profile_id, "token_id": token.pk, "token": describe(token)}
        # The SDK binds each session to the credential that opened it: another token (or another
        # profile's URL) cannot use it, the session answers 404 as if it did not exist.
        scope["user"] = AuthenticatedUser(AccessToken(
            token="-", client_id=f"gateway-token-{token.pk}", scopes=[], subject=f"profile-{profile_id}",
        ))
        manager = await self.manager()
        session_id = headers.get("mcp-session-id")
        if scope.get("method") != "DELETE" or not session_id:
            await manager.handle_request(scope, receive, send)
            return

        async def watch(message) -> None:
            # Recorded before the client hears the answer, so a client (or a test) that moves on at
            # once never races the last write of its session.
            if message["type"] == "http.response.start" and message["status"] < 300:
                await in_thread(record_session_closed)(session_id)
            await send(message)

        await manager.handle_request(scope, receive, watch)


_endpoint: GatewayEndpoint | None = None


def gateway_endpoint() -> GatewayEndpoint:
    global _endpoint
    if _endpoint is None:
        _endpoint = GatewayEndpoint()
    return _endpoint


def with_gateway(django_app):
    """The project's HTTP application: gateway paths to the MCP endpoint, the rest to Django."""

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").startswith(PATH_PREFIX):
            await gateway_endpoint()(scope, receive, send)
            return
        await django_app(scope, receive, send)

    return app
