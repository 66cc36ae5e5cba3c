"""Connections to MCP servers with the official `mcp` SDK: connect, initialize, list, call, close.

The SDK is async (anyio). `open_connection(config)` is the async core; the sync wrappers
(`list_server_tools`, `call_server_tool`, `check_connection`) run it on the process's one event loop
(`background_loop()`: the anyio portal of `per_process.portal()`, which the realtime sender shares), so Celery tasks and Django views — sync code, possibly
inside a thread that already has a loop — can use it without `asyncio.run` clashes.

Closing is the transport's job and happens on every exit path: a stdio child is stopped and
reaped after a normal close, a timeout, a crash or a cancelled caller.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import time
import warnings
from contextvars import ContextVar
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from mcp import ClientSession
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client._input_required import InputRequiredRoundsExceededError, run_input_required_driver
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientRequestContext
from mcp.client.subscriptions import listen as listen_stream
from mcp.shared.subscriptions import event_to_notification
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    DiscoverResult,
    Implementation,
    InputRequiredResult,
    LoggingMessageNotificationParams,
    PaginatedRequestParams,
    PromptReference,
    ResourceTemplateReference,
)

from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from playground.engine.execution import CancelSignal
from playground.mcp_servers.oauth import AuthorizationNeeded
from playground.mcp_servers.transports import McpTransport, ServerConfig, transport_for
from playground.mcp_servers.protocol_eras import AUTO, LEGACY
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.wire_capture import MessageNoter, RecordingStreams
from playground.per_process import portal

T = TypeVar("T")
logger = logging.getLogger(__name__)

# Receives a server's log lines as [(source, text)], source "stderr", "log:<level>" (a
# notifications/message), "session" (connected, disconnected, an HTTP session) or "error"; sync code,
# called in a worker thread (it may touch the database). See `LogForwarder`.
LogSink = Callable[[list[tuple[str, str]]], None]
LOG_POLL_SECONDS = 0.25
# What one resource read or prompt shows: a text past this is cut, a blob past it is not decoded.
MAX_SHOWN_CHARS = 64 * 1024
MAX_LIST_PAGES = 20

CLIENT_INFO = Implementation(name="toolsearch-playground", version="0.1.0")
DEFAULT_CONNECT_TIMEOUT = 20.0  # spawn + initialize; mcp-server-time needs ~0.5 s, a cold venv more
DEFAULT_CALL_TIMEOUT = 30.0
# A server answering tools/list with cursors forever is broken; stop rather than loop.
MAX_TOOL_PAGES = 100
# Rounds of a 2026-07-28 multi round-trip request (InputRequiredResult) before it is given up.
MAX_INPUT_ROUNDS = 5
# How long closing a connection waits for its last transcript messages to be written (protocol_log).
TRANSCRIPT_SETTLE_SECONDS = 2.0


@dataclass(frozen=True)
class InputRound:
    """Which request an input request of a 2026-07-28 server (MRTR) was asked during, and in which
    round: the workbench files the person's card under it (server_requests)."""

    request: str  # "tools/call book_table"
    round: int  # 1 for the InputRequiredResult answering the first request
    max_rounds: int

    def describe(self) -> str:
        return f"{self.request}, round {self.round} of at most {self.max_rounds}"


# Set while a handler answers an input request of an InputRequiredResult (None for a handshake-era
# server's own request).
ASKED_DURING: ContextVar[InputRound | None] = ContextVar("mcp_input_round", default=None)


@dataclass
class ClientHandlers:
    """How a session answers what a server asks of the client mid-call (the SDK's callbacks, passed to
    `ClientSession` as they are). A session given none offers none of these capabilities at
    initialize, so servers do not ask (the agent loop's and the gateway's sessions)."""

    sampling: Callable[..., Any] | None = None
    elicitation: Callable[..., Any] | None = None
    list_roots: Callable[..., Any] | None = None
    # Every other notification the server sends (resources/updated, list_changed); log messages go
    # to the connection's log sink.
    notifications: Callable[..., Any] | None = None
    # A tool call's progress (progress, total, message): given, calls ask for it (a progress token).
    progress: Callable[..., Any] | None = None

    def session_kwargs(self) -> dict[str, Any]:
        return {key: value for key, value in (
            ("sampling_callback", self.sampling), ("elicitation_callback", self.elicitation),
            ("list_roots_callback", self.list_roots), ("message_handler", self.notifications)) if value is not None}


class McpConnectionError(Exception):
    """The server could not be reached, initialized or kept: the message is meant for the UI."""


class McpAuthorizationNeeded(McpConnectionError):
    """The server answered 401 with `WWW-Authenticate` (it wants OAuth), or its grant stopped working:
    its page offers Connect instead of showing an error."""


class McpCallTimeout(McpConnectionError):
    """A request got no answer in time."""


class McpServerGone(McpConnectionError):
    """The connection closed under a request (the server exited or crashed)."""


@dataclass
class McpToolListing:
    """One `tools/list` entry, as plain JSON (what `engine.Tool.from_mcp` reads)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_mcp_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema, "_meta": self.meta}


@dataclass
class McpCallResult:
    """A `tools/call` result as plain JSON: MCP content blocks, structured content, isError."""

    content: list[dict[str, Any]]
    structured: Any = None
    is_error: bool = False
    duration_ms: float = 0.0


@dataclass
class ServerProbe:
    """What "Test connection" shows: who answered, how fast, how many tools."""

    server_name: str
    server_version: str
    protocol_version: str
    tool_count: int
    duration_ms: float
    tools_ttl_ms: int | None = None  # the listing's `ttlMs` (2026-07-28 servers), None when it gave none


def describe_error(exc: BaseException) -> str:
    """A readable one-paragraph message for an exception, unwrapping anyio's exception groups."""
    leaves = list(_leaf_exceptions(exc))
    interesting = [e for e in leaves if not isinstance(e, (anyio.get_cancelled_exc_class(), GeneratorExit))] or leaves
    parts: list[str] = []
    for leaf in interesting:
        text = str(leaf).strip() or leaf.__class__.__name__
        if isinstance(leaf, OSError) and leaf.filename and str(leaf.filename) not in text:
            text = f"{text}: {leaf.filename}"
        label = leaf.__class__.__name__
        part = text if text.startswith(label) else f"{label}: {text}"
        if part not in parts:
            parts.append(part)
    return "; ".join(parts) or exc.__class__.__name__


def _leaf_exceptions(exc: BaseException):
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaf_exceptions(inner)
    else:
        yield exc


def _first(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    return next((e for e in _leaf_exceptions(exc) if isinstance(e, kind)), None)


class McpConnection:
    """An initialized session with one server. Use through `open_connection`."""

    def __init__(self, config: ServerConfig, session: ClientSession, transport: McpTransport,
                 handlers: ClientHandlers | None = None) -> None:
        self.config = config
        self.session = session
        self.transport = transport
        self.handlers = handlers
        self.closed = False
        # The least `ttlMs` of the last tools/list's pages (2026-07-28): how long the listing stays fresh.
        self.tools_ttl_ms: int | None = None
        self.tools_offered = 0  # how many tools the last tools/list offered (more than it kept, past `keep`)
        # 2026-07-28: the resources this session is subscribed to, and the listen stream that carries
        # their updates and the list changes (`listen_for_changes`).
        self.subscribed: set[str] = set()
        self._listener: asyncio.Task | None = None
        self._listening = asyncio.Event()

    @property
    def server_info(self) -> Implementation | None:
        return self.session.server_info

    @property
    def protocol_version(self) -> str:
        return self.session.protocol_version or ""

    async def list_tools(self, *, timeout: float = DEFAULT_CONNECT_TIMEOUT, keep: int | None = None) -> list[McpToolListing]:
        """Every tool, following `nextCursor` page by page. With `keep`, only the first `keep` are
        kept (a hostile server's 10,000 tools are counted, not held): `self.tools_offered` says how many."""
        listings: list[McpToolListing] = []
        cursor: str | None = None
        self.tools_ttl_ms = None
        self.tools_offered = 0
        for _ in range(MAX_TOOL_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await self._request(self.session.list_tools(params=params), timeout, "tools/list")
            if result.ttl_ms is not None:
                self.tools_ttl_ms = result.ttl_ms if self.tools_ttl_ms is None else min(self.tools_ttl_ms, result.ttl_ms)
            for tool in result.tools:
                self.tools_offered += 1
                if keep is not None and len(listings) >= keep:
                    continue
                dumped = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
                listings.append(
                    McpToolListing(
                        name=tool.name,
                        description=tool.description or "",
                        input_schema=dumped.get("inputSchema") or {"type": "object", "properties": {}},
                        meta=dumped.get("_meta") or {},
                    )
                )
            cursor = result.next_cursor
            if not cursor:
                return listings
        raise McpConnectionError(f"tools/list still had a next cursor after {MAX_TOOL_PAGES} pages; giving up")

    async def call_tool(self, name: str, arguments: dict[str, Any], *, timeout: float = DEFAULT_CALL_TIMEOUT,
                        meta: dict[str, Any] | None = None) -> McpCallResult:
        started = time.perf_counter()
        progress = self.handlers.progress if self.handlers is not None else None
        result = await self._request(self._rounds(lambda responses, state: self.session.call_tool(
            name, arguments, read_timeout_seconds=timeout, progress_callback=progress, input_responses=responses,
            request_state=state, meta=meta, allow_input_required=True), f"tools/call {name}"), timeout, f"tools/call {name}")
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return McpCallResult(
            content=dumped.get("content") or [],
            structured=dumped.get("structuredContent"),
            is_error=bool(dumped.get("isError")),
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    async def ping(self, *, timeout: float = 5.0) -> None:
        """`ping`; the stateless era has none, so there the round trip is a `server/discover`."""
        if is_stateless(self.session):
            await self._request(self.session.send_discover(self.protocol_version), timeout, "server/discover")
            return
        await self._request(self.session.send_ping(), timeout, "ping")

    @property
    def stateless(self) -> bool:
        return is_stateless(self.session)

    async def listen_for_changes(self) -> None:
        """(Re)open this stateless session's `subscriptions/listen` stream, from the first resource
        subscription on (a session with none keeps no stream open): tool, prompt and resource list
        changes and the subscribed resources' updates, handed to the notifications handler as the
        notifications a handshake-era server sends on its own. Returns once acknowledged."""
        if self.handlers is None or self.handlers.notifications is None or not self.stateless:
            return
        await self.stop_listening()
        self._listening = asyncio.Event()
        self._listener = asyncio.get_running_loop().create_task(self._listen(sorted(self.subscribed), self._listening))
        waiting = asyncio.ensure_future(self._listening.wait())
        await asyncio.wait([waiting, self._listener], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._listener.done() and not self._listening.is_set():
            self._listener.result()  # raises what ended it before the acknowledgement

    async def _listen(self, uris: list[str], acknowledged: asyncio.Event) -> None:
        async with listen_stream(self.session, tools_list_changed=True, prompts_list_changed=True,
                                 resources_list_changed=True, resource_subscriptions=uris) as subscription:
            acknowledged.set()
            async for event in subscription:
                await self.handlers.notifications(event_to_notification(event, {}))

    async def stop_listening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not listener.done():
            listener.cancel()
            try:
                await listener
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - ending the stream
                pass

    def _handshake_only(self, method: str) -> None:
        if self.stateless:
            raise McpConnectionError(f"{method} is not part of MCP {self.protocol_version}, which this server speaks "
                                     "(set its protocol era to legacy to use it)")

    async def _rounds(self, send: Callable[[Any, str | None], Coroutine[Any, Any, Any]], what: str) -> Any:
        """A request that a 2026-07-28 server may answer with an `InputRequiredResult` (MRTR): its
        input requests (sampling, elicitation, roots) go to this session's handlers — the workbench
        asks a person; a session without handlers (the agent loop's, the gateway's) refuses them, so
        nothing answers with the model unasked — and the request is sent again with the answers and
        the server's `requestState`, at most MAX_INPUT_ROUNDS times."""
        first = await send(None, None)
        if not isinstance(first, InputRequiredResult):
            return first
        session = self.session
        current_round = [1]

        async def dispatch(key: str, request: Any) -> Any:
            # Each input request runs in a task of its own: the variable is set for its handler only.
            ASKED_DURING.set(InputRound(what, current_round[0], MAX_INPUT_ROUNDS))
            context = ClientRequestContext(session=session, request_id=key,
                                           meta=request.params.meta if request.params else None)
            return await session.dispatch_input_request(context, request)

        async def retry(responses: Any, state: str | None) -> Any:
            current_round[0] += 1
            return await send(responses, state)

        try:
            return await run_input_required_driver(first, dispatch=dispatch, retry=retry, max_rounds=MAX_INPUT_ROUNDS)
        except InputRequiredRoundsExceededError as exc:
            raise McpConnectionError(f"the server still asked for input after {MAX_INPUT_ROUNDS} rounds; "
                                     "the request was given up") from exc

    @property
    def capabilities(self) -> dict[str, bool]:
        """What the server said it offers at initialize (resources, prompts, logging)."""
        caps = self.session.server_capabilities
        return {
            "resources": bool(caps and caps.resources is not None),
            "subscribe": bool(caps and caps.resources is not None and caps.resources.subscribe),
            "prompts": bool(caps and caps.prompts is not None),
            "logging": bool(caps and caps.logging is not None),
            "completions": bool(caps and caps.completions is not None),
        }

    async def send_roots_list_changed(self) -> None:
        """Tell the server the client's roots changed (`notifications/roots/list_changed`). A
        stateless server asks for roots with each request that needs them: nothing to tell."""
        if self.stateless:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # marked deprecated for a future protocol revision; today's servers use it
            await self.session.send_roots_list_changed()

    async def timed_ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time of one `ping`, in milliseconds."""
        started = time.perf_counter()
        await self.ping(timeout=timeout)
        return (time.perf_counter() - started) * 1000

    async def list_resources(self, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> list[dict[str, Any]]:
        """Every resource (uri, name, description, mimeType, size), following cursors."""
        return await self._paged(self.session.list_resources, "resources", "resources/list", timeout)

    async def list_resource_templates(self, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> list[dict[str, Any]]:
        """Every resource template (uriTemplate, name, description, mimeType), following cursors."""
        return await self._paged(self.session.list_resource_templates, "resource_templates", "resources/templates/list", timeout)

    async def subscribe_resource(self, uri: str, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        """`resources/subscribe` in the handshake era; in 2026-07-28 the session's listen stream is
        opened again with the URI among its `resourceSubscriptions`."""
        if self.stateless:
            self.subscribed.add(uri)
            await self._request(self.listen_for_changes(), timeout, "subscriptions/listen")
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await self._request(self.session.subscribe_resource(uri), timeout, f"resources/subscribe {uri}")

    async def unsubscribe_resource(self, uri: str, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        if self.stateless:
            self.subscribed.discard(uri)
            await self._request(self.listen_for_changes(), timeout, "subscriptions/listen")
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await self._request(self.session.unsubscribe_resource(uri), timeout, f"resources/unsubscribe {uri}")

    async def complete(self, ref: PromptReference | ResourceTemplateReference, argument: str, value: str,
                       context: dict[str, str] | None = None, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> dict[str, Any]:
        """`completion/complete`: suggested values for one argument (values, total, hasMore)."""
        result = await self._request(self.session.complete(ref, {"name": argument, "value": value}, context_arguments=context or None),
                                     timeout, "completion/complete")
        return result.completion.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def set_logging_level(self, level: str, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        """`logging/setLevel`: the least level of the log messages the server should send."""
        self._handshake_only("logging/setLevel")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # marked deprecated for a future protocol revision; today's servers use it
            await self._request(self.session.set_logging_level(level), timeout, "logging/setLevel")

    async def list_prompts(self, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> list[dict[str, Any]]:
        """Every prompt (name, description, arguments), following cursors."""
        return await self._paged(self.session.list_prompts, "prompts", "prompts/list", timeout)

    async def read_resource(self, uri: str, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> list[dict[str, Any]]:
        """A resource's contents as plain JSON: each item has uri, mimeType and text or blob."""
        result = await self._request(self._rounds(lambda responses, state: self.session.read_resource(
            uri, input_responses=responses, request_state=state, allow_input_required=True), f"resources/read {uri}"),
            timeout, f"resources/read {uri}")
        return result.model_dump(by_alias=True, mode="json", exclude_none=True).get("contents") or []

    async def get_prompt(self, name: str, arguments: dict[str, str], *, timeout: float = DEFAULT_CALL_TIMEOUT) -> dict[str, Any]:
        """A prompt's messages for these arguments, as plain JSON (description, messages)."""
        result = await self._request(self._rounds(lambda responses, state: self.session.get_prompt(
            name, arguments or None, input_responses=responses, request_state=state, allow_input_required=True),
            f"prompts/get {name}"), timeout, f"prompts/get {name}")
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _paged(self, method: Callable[..., Any], field_name: str, what: str, timeout: float) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await self._request(method(params=params), timeout, what)
            items.extend(item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in getattr(result, field_name))
            cursor = result.next_cursor
            if not cursor:
                return items
        raise McpConnectionError(f"{what} still had a next cursor after {MAX_LIST_PAGES} pages; giving up")

    async def _request(self, awaitable: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        try:
            # The SDK enforces the read timeout itself; the outer bound also covers a hung write.
            with anyio.fail_after(timeout + 5):
                return await awaitable
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpCallTimeout(f"{what} timed out after {timeout:g} s ({self.config.describe_briefly()})") from exc
            if exc.code == CONNECTION_CLOSED:
                self.closed = True
                raise self._gone(what) from exc
            raise
        except TimeoutError as exc:
            raise McpCallTimeout(f"{what} timed out after {timeout:g} s ({self.config.describe_briefly()})") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self.closed = True
            raise self._gone(what) from exc

    def _gone(self, what: str) -> McpConnectionError:
        """The connection ended mid-request: its OAuth grant failing says so (the HTTP client closes
        the connection when its auth raises), anything else is the server gone."""
        failure = getattr(getattr(self.transport, "auth", None), "failure", None)
        if failure is not None:
            needed = _authorization_needed(failure, self.transport)
            if needed is not None:
                return McpAuthorizationNeeded(scrub_for(self.config, needed))
        return McpServerGone(self._gone_message(what))

    def _gone_message(self, what: str) -> str:
        message = f"the server closed the connection during {what} (it exited or crashed; {self.config.describe_briefly()})"
        diagnostics = self.transport.diagnostics()
        return scrub_for(self.config, f"{message}\n{diagnostics}" if diagnostics else message)


def shown_contents(contents: list[dict[str, Any]], *, limit: int = MAX_SHOWN_CHARS) -> list[dict[str, Any]]:
    """Resource contents made safe to show: text cut at `limit` characters (saying so), a blob
    reduced to its type and size (an image small enough is kept for an <img>), nothing executed."""
    shown: list[dict[str, Any]] = []
    for item in contents:
        entry: dict[str, Any] = {"uri": item.get("uri", ""), "mime_type": item.get("mimeType") or ""}
        if "text" in item:
            text = str(item.get("text") or "")
            entry.update(kind="text", size=len(text), text=text[:limit], cut=len(text) > limit)
        else:
            blob = str(item.get("blob") or "")
            try:
                size = len(base64.b64decode(blob, validate=True))
            except (ValueError, TypeError):
                size = -1
            entry.update(kind="blob", size=size, cut=False)
            if size >= 0 and entry["mime_type"] in ("image/png", "image/jpeg", "image/gif", "image/webp") and len(blob) <= limit:
                entry["image_data"] = blob
        shown.append(entry)
    return shown


class LogForwarder:
    """Hands a server's log lines to a `LogSink` while a connection is open: the stdio child's
    stderr (read from its file every `LOG_POLL_SECONDS`), `notifications/message` logs, and the
    connection's own events (connected, disconnected, an HTTP session, an error) — for an HTTP
    server, which has no stderr for us, those and its log messages are all there is.

    The sink runs in a worker thread, so it may use the database and the channel layer; a failing
    sink is logged and never breaks the connection.
    """

    MAX_LINE_CHARS = 2000

    def __init__(self, sink: LogSink, transport: McpTransport) -> None:
        self.sink = sink
        self.transport = transport
        self.pending: list[tuple[str, str]] = []
        self._offset = 0
        self._partial = ""
        self._task: asyncio.Task | None = None
        transport.on_event = self.note

    def note(self, source: str, text: str) -> None:
        self.pending.append((source, text[: self.MAX_LINE_CHARS]))

    async def on_log_message(self, params: LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else repr(params.data)
        prefix = f"[{params.logger}] " if params.logger else ""
        self.pending.append((f"log:{params.level}", (prefix + data)[: self.MAX_LINE_CHARS]))

    def _collect_stderr(self, *, final: bool) -> None:
        chunk, self._offset = self.transport.read_stderr(self._offset)
        if not chunk and not (final and self._partial):
            return
        lines = (self._partial + chunk).split("\n")
        self._partial = "" if final else lines.pop()
        self.pending.extend(("stderr", line.rstrip("\r")[: self.MAX_LINE_CHARS]) for line in lines if line.strip())

    async def report_error(self, text: str) -> None:
        """A connection that failed (or a request that lost it): its reason goes to the log too."""
        self.note("error", text)
        with anyio.move_on_after(5, shield=True):
            await self.flush(final=True)

    async def flush(self, *, final: bool = False) -> None:
        self._collect_stderr(final=final)
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        try:
            await anyio.to_thread.run_sync(self.sink, batch)
        except Exception:
            logger.warning("could not record %d log lines of MCP server %s", len(batch), self.transport.config.name, exc_info=True)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(LOG_POLL_SECONDS)
            await self.flush()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping the poller
                pass
        # The last lines (a crash's traceback) still count: shielded, so a cancelled caller keeps them.
        with anyio.move_on_after(5, shield=True):
            await self.flush(final=True)


@asynccontextmanager
async def open_connection(
    config: ServerConfig, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, log_sink: LogSink | None = None,
    handlers: ClientHandlers | None = None, transcript: MessageNoter | None = None, auth: Any = None,
) -> AsyncIterator[McpConnection]:
    """Connect and initialize; leaving the block closes the session and the transport.

    Failures to start, reach or initialize the server raise `McpConnectionError` with a message
    for the UI (for stdio, with the tail of the server's stderr). With `log_sink`, the server's
    stderr lines and log notifications go to it while the connection is open (`LogForwarder`).
    With `handlers`, the session offers sampling / elicitation / roots and answers through them.
    With `transcript`, every JSON-RPC message both ways is noted in it (the Protocol view).
    With `auth` (an httpx auth: oauth_connect's interactive sign-in), an HTTP or SSE server is reached
    through it instead of its stored grant. A server that wants a sign-in raises `McpAuthorizationNeeded`.
    """
    transport = transport_for(config)
    if auth is not None:
        transport.auth = auth  # type: ignore[attr-defined]  # HTTP and SSE transports only
    connection: McpConnection | None = None
    forwarder = LogForwarder(log_sink, transport) if log_sink is not None else None
    try:
        async with transport.streams() as (read_stream, write_stream):
            if transcript is not None:
                recording = RecordingStreams(transcript, read_stream, write_stream)
                read_stream, write_stream = recording.read, recording.write
            if forwarder is not None:
                forwarder.start()
            try:
                async with ClientSession(
                    read_stream, write_stream, read_timeout_seconds=connect_timeout, client_info=CLIENT_INFO,
                    logging_callback=forwarder.on_log_message if forwarder is not None else None,
                    # 2026-07-28 servers log only to requests that opt in (per request, in _meta);
                    # the handshake era ignores this and sends what logging/setLevel allows.
                    log_level="debug" if forwarder is not None else None,
                    **(handlers.session_kwargs() if handlers is not None else {}),
                ) as session:
                    with anyio.fail_after(connect_timeout):
                        await negotiate(session, config.protocol_era)
                    if forwarder is not None:
                        forwarder.note("session", _connected_text(config, session))
                    connection = McpConnection(config, session, transport, handlers)
                    try:
                        yield connection
                    finally:
                        await connection.stop_listening()
            finally:
                if forwarder is not None:
                    if connection is not None:
                        forwarder.note("session", "disconnected")
                    await forwarder.stop()
    except BaseException as exc:
        known = exc if isinstance(exc, McpConnectionError) else _first(exc, McpConnectionError)
        if known is not None:
            if forwarder is not None:
                await forwarder.report_error(str(known))
            raise known from (None if known is exc else exc)
        if isinstance(exc, (KeyboardInterrupt, SystemExit, anyio.get_cancelled_exc_class())):
            raise
        needed = _authorization_needed(exc, transport)
        if needed is not None and connection is None:
            if forwarder is not None:
                await forwarder.report_error(needed)
            raise McpAuthorizationNeeded(scrub_for(config, needed)) from exc
        if connection is not None:
            # Raised by the caller's block: hand back its own exception, not anyio's group around it.
            leaves = [e for e in _leaf_exceptions(exc) if not isinstance(e, anyio.get_cancelled_exc_class())]
            if len(leaves) == 1 and leaves[0] is not exc:
                raise leaves[0] from exc
            raise
        message = f"could not connect to {config.describe_briefly()}: {_connect_message(exc)}"
        if forwarder is not None:
            await forwarder.report_error(message)  # the sink scrubs it; the stderr tail is in the log already
        diagnostics = transport.diagnostics()
        # The error text (and the server's stderr) may quote the URL, an argument or an env value.
        raise McpConnectionError(scrub_for(config, f"{message}\n{diagnostics}" if diagnostics else message)) from exc
    finally:
        if transcript is not None:
            # After the transport closed (a stdio child is already reaped): the last messages are
            # written now, not left to a loop a one-shot command is about to leave; briefly.
            with anyio.move_on_after(TRANSCRIPT_SETTLE_SECONDS, shield=True):
                await transcript.settle()


def _authorization_needed(exc: BaseException, transport: McpTransport) -> str | None:
    """Why a failed connection needs a person's sign-in, or None if it failed for something else."""
    auth_failure = getattr(getattr(transport, "auth", None), "failure", None)
    causes = [exc, auth_failure] if auth_failure is not None else [exc]
    needed = next((found for cause in causes if (found := _first(cause, AuthorizationNeeded)) is not None), None)
    if needed is not None:
        return str(needed)
    flow_error = next((found for cause in causes for kind in (OAuthFlowError, OAuthTokenError, OAuthRegistrationError)
                       if (found := _first(cause, kind)) is not None), None)
    if flow_error is not None:
        # The SDK's state-mismatch text quotes both states: say what happened, not the values.
        detail = ("the authorization answer's state did not match the request's" if "State parameter mismatch" in str(flow_error)
                  else describe_error(flow_error))
        return f"the OAuth sign-in with the server's authorization server failed ({detail})"
    if getattr(transport, "auth_challenge", ""):
        return (f"{transport.config.describe_briefly()} asks for authorization (HTTP 401 with WWW-Authenticate): "
                "an admin presses Connect on the server's page to sign in")
    return None


async def negotiate(session: ClientSession, era: str) -> None:
    """Settle the protocol with the server as its `protocol_era` says: "legacy" is the initialize
    handshake; "auto" probes `server/discover` at the newest stateless version and falls back to the
    handshake on a server that does not answer it (the SDK's own policy, as `Client(mode="auto")`);
    a pinned version sends `server/discover` at that version only, and a server that does not speak
    it is an error saying so, not a silent handshake."""
    if era == LEGACY:
        await session.initialize()
        return
    if era == AUTO or era not in MODERN_PROTOCOL_VERSIONS:
        await negotiate_auto(session)
        return
    try:
        raw = await session.send_discover(era)
        session.adopt(DiscoverResult.model_validate(raw))
    except (MCPError, ValidationError, RuntimeError) as exc:
        raise McpConnectionError(
            f"the server does not speak MCP {era} (server/discover: {describe_error(exc)}); "
            "set its protocol era to auto or legacy") from exc


def is_stateless(session: ClientSession) -> bool:
    """Whether the session speaks a stateless (2026-07-28+) version: no ping, logging, roots or
    server-initiated requests there."""
    return (session.protocol_version or "") in MODERN_PROTOCOL_VERSIONS


def _connected_text(config: ServerConfig, session: ClientSession) -> str:
    info = session.server_info
    who = f"{info.name} {info.version}" if info is not None else "a server that does not name itself"
    how = "stateless, server/discover" if is_stateless(session) else "initialize handshake"
    return f"connected to {config.describe_briefly()}: {who}, MCP protocol {session.protocol_version} ({how})"


def _connect_message(exc: BaseException) -> str:
    if _first(exc, TimeoutError) is not None:
        return "no answer to initialize in time (is it an MCP server? is the URL right?)"
    protocol_error = _first(exc, MCPError)
    if isinstance(protocol_error, MCPError) and protocol_error.code == CONNECTION_CLOSED:
        return "the server closed the connection before initializing (it exited: see its stderr)"
    return describe_error(exc)


# --- the process's event loop (per_process.portal(), shared with the realtime sender) -----------------


class BackgroundLoop:
    """`run(coro)` runs a coroutine on the process's portal loop and waits for it from sync code."""

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None, *, cancel: CancelSignal | None = None) -> T:
        """Run `coro` on the loop and wait for its result (`Portal.wait`: a run on the loop yields
        meanwhile, another thread blocks). With `cancel`: once it is set, the task is cancelled (the
        SDK then sends the server `notifications/cancelled` for a request in flight) and
        CallCancelled raised here at once."""
        return portal().wait(coro, timeout, cancel=cancel)


_loop = BackgroundLoop()


def background_loop() -> BackgroundLoop:
    """Runs coroutines on this process's loop (a forked Celery child starts its own: threads do not survive fork)."""
    return _loop


# --- sync wrappers: one connection per operation ------------------------------------------------


def list_server_tools(
    config: ServerConfig, *, timeout: float = DEFAULT_CONNECT_TIMEOUT, log_sink: LogSink | None = None,
    keep: int | None = None, transcript: MessageNoter | None = None,
) -> tuple[list[McpToolListing], ServerProbe]:
    """Connect, list every tool (the first `keep` of them; the probe's count is every one), close."""

    async def run() -> tuple[list[McpToolListing], ServerProbe]:
        started = time.perf_counter()
        async with open_connection(config, connect_timeout=timeout, log_sink=log_sink, transcript=transcript) as connection:
            tools = await connection.list_tools(timeout=timeout, keep=keep)
            info = connection.server_info
            probe = ServerProbe(
                server_name=info.name if info else "",
                server_version=info.version if info else "",
                protocol_version=connection.protocol_version,
                tool_count=connection.tools_offered,
                duration_ms=(time.perf_counter() - started) * 1000,
                tools_ttl_ms=connection.tools_ttl_ms,
            )
        return tools, probe

    return background_loop().run(run())


def check_connection(config: ServerConfig, *, timeout: float = DEFAULT_CONNECT_TIMEOUT,
                     transcript: MessageNoter | None = None) -> ServerProbe:
    """"Test connection": connect, initialize, count tools, close. Raises McpConnectionError. It keeps
    none of the tools (counted page by page, not held: a sync stores them)."""
    return list_server_tools(config, timeout=timeout, keep=0, transcript=transcript)[1]


def call_server_tool(
    config: ServerConfig, name: str, arguments: dict[str, Any], *, timeout: float = DEFAULT_CALL_TIMEOUT
) -> McpCallResult:
    """Connect, call one tool, close (the executor's pool reuses sessions instead)."""

    async def run() -> McpCallResult:
        async with open_connection(config) as connection:
            return await connection.call_tool(name, arguments, timeout=timeout)

    return background_loop().run(run())
