"""The SDK's session manager, able to take over a session another web process opened.

The `mcp` SDK keeps each stateful session's transport in the memory of the process that answered
`initialize`, and answers 404 for any session id it does not hold. Nothing else of a gateway
session lives in memory: its discovered tools, events and prompts are rows, and the handshake's
outcome (the client's initialize params and the negotiated protocol version) is saved with the
session (server.py). So when a request carries an `Mcp-Session-Id` this process does not hold,
this manager looks the session up; if the same token opened it on the same profile, it is not
closed and it was active within GATEWAY_SESSION_IDLE_SECONDS, the manager creates a transport for
that id and starts the session's server task with a connection already initialized from the saved
handshake, then serves the request. A client can thus reach any web process (no sticky routing
needed), and a restart no longer ends its sessions.

This overrides one private method of `StreamableHTTPSessionManager` and uses its private session
tables (`_server_instances`, `_session_owners`, `_session_creation_lock`, `_discard_session`) and
the runner's `serve_connection` / `Connection.for_loop`, as the SDK's own `_serve_opening_request`
does: tests/gateway/test_several_nodes.py fails if an SDK upgrade changes them.
"""
from __future__ import annotations

import logging
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import InitializeRequestParams
from pydantic import ValidationError

from playground.gateway.server import SCOPE_KEY, in_thread, resumable_session

logger = logging.getLogger("playground.gateway")


class ResumingSessionManager(StreamableHTTPSessionManager):
    async def _handle_stateful_request(self, scope, receive, send) -> None:
        session_id = _header(scope, MCP_SESSION_ID_HEADER)
        if session_id and session_id not in self._server_instances:
            await self._resume(session_id, scope)
        await super()._handle_stateful_request(scope, receive, send)

    async def _resume(self, session_id: str, scope: dict[str, Any]) -> None:
        """Take the session over if it may be (else leave it unknown: the SDK answers 404)."""
        info = scope.get(SCOPE_KEY) or {}
        user = scope.get("user")
        if not info.get("token_id") or not isinstance(user, AuthenticatedUser) or len(session_id) > 100:
            return
        found = await in_thread(resumable_session)(session_id, info["profile_id"], info["token_id"])
        if found is None:
            return
        params, version = found
        try:
            client_params = InitializeRequestParams.model_validate(params, by_name=False)
        except ValidationError:
            logger.warning("MCP gateway: session %s… has unreadable saved initialize params; not resumed", session_id[:8])
            return
        async with self._session_creation_lock:
            if session_id in self._server_instances:
                return  # another request of the same session resumed it meanwhile
            if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
                return
            transport = StreamableHTTPServerTransport(
                mcp_session_id=session_id, is_json_response_enabled=self.json_response, event_store=self.event_store,
                security_settings=self.security_settings, retry_interval=self.retry_interval,
                idle_timeout=self.session_idle_timeout,
            )
            self._session_owners[session_id] = authorization_context(user)
            self._server_instances[session_id] = transport
        try:
            assert self._task_group is not None
            await self._task_group.start(self._run_resumed, session_id, transport, client_params, version)
        except BaseException:
            await self._discard_session(session_id, transport)
            raise
        logger.info("MCP gateway: resumed session %s… opened by another process (%s)", session_id[:8], info.get("token", ""))

    async def _run_resumed(self, session_id: str, transport: StreamableHTTPServerTransport,
                           client_params: InitializeRequestParams, version: str, *,
                           task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's server task, as the SDK's own, but born initialized from the saved handshake."""
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            try:
                idle_scope = transport.idle_scope if transport.idle_scope is not None else anyio.CancelScope()
                with idle_scope:
                    dispatcher = JSONRPCDispatcher(read_stream, write_stream, inline_methods=frozenset({"initialize"}))
                    connection = Connection.for_loop(dispatcher, session_id=session_id, protocol_version_hint=version)
                    connection.client_params = client_params
                    connection.initialized.set()
                    await serve_connection(self.app, dispatcher, connection=connection, lifespan_state=self._lifespan_state)
                if idle_scope.cancelled_caught:
                    logger.info("MCP gateway: resumed session %s… idle timeout", session_id[:8])
            except Exception:
                logger.exception("MCP gateway: resumed session %s… crashed", session_id[:8])
            finally:
                await self._discard_session(session_id, transport)


def _header(scope: dict[str, Any], name: str) -> str | None:
    wanted = name.lower().encode("latin-1")
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return value.decode("latin-1")
    return None
