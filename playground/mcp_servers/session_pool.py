"""A per-process pool of open MCP sessions, so repeated tool calls skip the connect cost.

Each pooled session lives in one task on the process's background loop (anyio context managers
must be left by the task that entered them): the task opens the connection, signals ready, and
holds it until asked to close. Sessions are keyed by server id and the config fingerprint, so an
edited server gets a fresh session. A session idle for a while is pinged before reuse and replaced
if the server went away. After a timeout or a crash mid-call the session is discarded (closing it
stops and reaps a stdio child); the next call reconnects. Everything is closed at interpreter exit.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from playground.engine.execution import CancelSignal
from playground.mcp_servers.connection import (
    ClientHandlers,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    LogSink,
    McpCallResult,
    McpCallTimeout,
    McpConnection,
    McpConnectionError,
    McpServerGone,
    background_loop,
    open_connection,
)
from playground.mcp_servers.transports import ServerConfig
from playground.per_process import PerProcess
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.protocol_log import transcript_for_server
from playground.mcp_servers.server_log import sink_for
from playground.mcp_servers.wire_capture import MessageNoter
from playground.mcp_servers.server_requests import handlers_for, waiting_on_person

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A session unused for this long is pinged before reuse (a cheap check that the server is still there).
IDLE_PING_AFTER = 2.0
CLOSE_TIMEOUT = 10.0


class PooledSession:
    """One open connection, owned by its holder task on the background loop."""

    def __init__(self, config: ServerConfig, log_sink: LogSink | None = None, handlers: ClientHandlers | None = None,
                 transcript: MessageNoter | None = None) -> None:
        self.config = config
        self.transcript = transcript
        self.log_sink = log_sink
        self.handlers = handlers
        self.connection: McpConnection | None = None
        self.error: BaseException | None = None
        self.last_used = time.monotonic()
        self.lock = asyncio.Lock()  # one request at a time keeps timeout/crash attribution simple
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self, connect_timeout: float) -> None:
        self._task = asyncio.get_running_loop().create_task(self._hold(connect_timeout))
        await self._ready.wait()
        if self.error is not None:
            raise self.error

    async def _hold(self, connect_timeout: float) -> None:
        try:
            async with open_connection(self.config, connect_timeout=connect_timeout, log_sink=self.log_sink,
                                       handlers=self.handlers, transcript=self.transcript) as connection:
                self.connection = connection
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:
            self.error = exc if isinstance(exc, McpConnectionError) else McpConnectionError(scrub_for(self.config, str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.connection = None
            self._ready.set()

    @property
    def alive(self) -> bool:
        return self.connection is not None and not self.connection.closed and not self._closing.is_set()

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - closing must not raise
                logger.warning("closing the MCP session for %s took too long", self.config.name)


class SessionPool:
    """Open sessions of this process by (server id, config fingerprint).

    `handlers_for(server id, config)`, when given, makes each registered server's session answer what
    the server asks mid-call (the workbench's pool: sampling, answered by a person). Without it a
    session offers none of that, so the agent loop's calls never wait on a person."""

    def __init__(self, handlers_for: Callable[[int, ServerConfig], ClientHandlers] | None = None) -> None:
        self.handlers_for = handlers_for
        self._sessions: dict[tuple[Any, str], PooledSession] = {}
        self._guard: asyncio.Lock | None = None
        self._closers: set[asyncio.Task] = set()

    def call_tool(
        self, key: Any, config: ServerConfig, name: str, arguments: dict[str, Any], *, timeout: float = DEFAULT_CALL_TIMEOUT,
        cancel: CancelSignal | None = None, meta: dict[str, Any] | None = None,
    ) -> McpCallResult:
        """Call through a pooled session (sync; runs on the background loop). Raises McpConnectionError,
        or CallCancelled when `cancel` is set meanwhile (the request is cancelled through the protocol).
        `meta` rides in the request's `_meta` (our trace context: trace_context.py)."""
        return background_loop().run(self._call(key, config, name, arguments, timeout, meta), cancel=cancel)

    def run(
        self, key: Any, config: ServerConfig, operation: Callable[[McpConnection], Awaitable[T]], *, timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> T:
        """Run `operation(connection)` on a pooled session (sync): the workbench's ping, resources and
        prompts. A timeout or a crash discards the session, as for tool calls. Raises McpConnectionError."""
        return background_loop().run(self._run(key, config, operation), timeout=timeout + DEFAULT_CONNECT_TIMEOUT + 10)

    async def _run(self, key: Any, config: ServerConfig, operation: Callable[[McpConnection], Awaitable[T]]) -> T:
        session = await self._session_for(key, config)
        self._refuse_while_waiting_on_person(key, session)
        async with session.lock:
            if not session.alive:
                await self._drop(key, config, session)
                session = await self._session_for(key, config)
            try:
                result = await operation(session.connection)  # type: ignore[arg-type]
            except (McpCallTimeout, McpServerGone):
                await self._drop(key, config, session)
                raise
            session.last_used = time.monotonic()
            return result

    def notify_open_session(self, key: Any, config: ServerConfig, notify: Callable[[McpConnection], Awaitable[None]]) -> bool:
        """Send a notification on the server's session if this process has one open (a session that is
        not open has nothing to be told: it will ask anew). Whether it was sent."""
        async def send() -> bool:
            session = self._sessions.get((key, config.fingerprint))
            if session is None or not session.alive:
                return False
            await notify(session.connection)  # type: ignore[arg-type]
            return True

        return background_loop().run(send(), timeout=CLOSE_TIMEOUT)

    def close_all(self) -> None:
        if not self._sessions and not self._closers:
            return
        try:
            background_loop().run(self._close_all(), timeout=CLOSE_TIMEOUT + 5)
        except Exception:
            logger.exception("closing pooled MCP sessions failed")

    def discard(self, key: Any) -> None:
        """Close every session of one server (e.g. after its config changed or it was deleted)."""
        background_loop().run(self._discard_key(key), timeout=CLOSE_TIMEOUT + 5)

    def open_count(self) -> int:
        return sum(1 for s in self._sessions.values() if s.alive)

    async def acall_tool(self, key: Any, config: ServerConfig, name: str, arguments: dict[str, Any], *,
                         timeout: float = DEFAULT_CALL_TIMEOUT) -> McpCallResult:
        """`call_tool` for code already on the background loop (a workbench call the view does not wait for)."""
        return await self._call(key, config, name, arguments, timeout)

    def _refuse_while_waiting_on_person(self, key: Any, session: PooledSession) -> None:
        # One request at a time per session: one that waits on a person's answer would hold this
        # one (and the web request behind it) as long. Say so instead of waiting.
        if self.handlers_for is not None and session.lock.locked() and isinstance(key, int) and waiting_on_person(key):
            raise McpConnectionError("the server is waiting for your answer to its request (see Server requests): "
                                     "answer or decline it first")

    async def _call(self, key: Any, config: ServerConfig, name: str, arguments: dict[str, Any], timeout: float,
                    meta: dict[str, Any] | None = None) -> McpCallResult:
        session = await self._session_for(key, config)
        self._refuse_while_waiting_on_person(key, session)
        async with session.lock:
            if not session.alive:  # went away while we waited for the lock
                await self._drop(key, config, session)
                session = await self._session_for(key, config)
            try:
                result = await session.connection.call_tool(name, arguments, timeout=timeout, meta=meta)  # type: ignore[union-attr]
            except (McpCallTimeout, McpServerGone):
                # The server is busy with the timed-out call or dead: a new session is the clean state.
                await self._drop(key, config, session)
                raise
            session.last_used = time.monotonic()
            return result

    async def _session_for(self, key: Any, config: ServerConfig) -> PooledSession:
        if self._guard is None:
            self._guard = asyncio.Lock()
        async with self._guard:
            pool_key = (key, config.fingerprint)
            session = self._sessions.get(pool_key)
            if session is not None and session.alive and time.monotonic() - session.last_used > IDLE_PING_AFTER:
                try:
                    await session.connection.ping()  # type: ignore[union-attr]
                except McpConnectionError:
                    logger.info("MCP server %s went away; reconnecting", config.name)
                    await session.close()
            if session is None or not session.alive:
                if session is not None:
                    await session.close()
                # A changed config leaves the old session behind under the old fingerprint: close it.
                for stale in [k for k in self._sessions if k[0] == key and k != pool_key]:
                    await self._sessions.pop(stale).close()
                # Registered servers (integer keys) get a live log; other keys (tests' own) do not.
                registered = isinstance(key, int)
                handlers = self.handlers_for(key, config) if registered and self.handlers_for is not None else None
                session = PooledSession(config, sink_for(key, config) if registered else None, handlers,
                                        transcript_for_server(key, config) if registered else None)
                self._sessions[pool_key] = session
                try:
                    await session.start(DEFAULT_CONNECT_TIMEOUT)
                except BaseException as exc:
                    self._sessions.pop(pool_key, None)
                    if isinstance(exc, asyncio.CancelledError):
                        # The caller was cancelled while the session connected: its holder task goes on
                        # connecting, and must still be closed (or a stdio child is left behind).
                        self._closers.add(closer := asyncio.get_running_loop().create_task(session.close()))
                        closer.add_done_callback(self._closers.discard)
                    raise
            return session

    async def _drop(self, key: Any, config: ServerConfig, session: PooledSession) -> None:
        pool_key = (key, config.fingerprint)
        if self._sessions.get(pool_key) is session:
            del self._sessions[pool_key]
        await session.close()

    async def _discard_key(self, key: Any) -> None:
        for pool_key in [k for k in self._sessions if k[0] == key]:
            await self._sessions.pop(pool_key).close()

    async def _close_all(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), *self._closers, return_exceptions=True)


# Made after connection.py's loop (this module imports it), so its close runs first at exit (atexit
# is last-in, first-out): the sessions close on a loop that is still running.
_pools: PerProcess[SessionPool] = PerProcess(SessionPool, close=SessionPool.close_all)


def session_pool() -> SessionPool:
    """This process's pool (a forked worker starts with an empty one)."""
    return _pools.get()


# The workbench's own sessions: a person's interactive session with each server (like MCP Inspector's),
# which offers sampling and waits for the person's answers. Apart from the agent loop's sessions, so
# a conversation's tool call never waits on someone at the workbench.
_workbench_pools: PerProcess[SessionPool] = PerProcess(lambda: SessionPool(handlers_for), close=SessionPool.close_all)


def workbench_pool() -> SessionPool:
    """This process's workbench pool."""
    return _workbench_pools.get()
