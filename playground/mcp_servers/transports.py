"""Transports: how the playground reaches one MCP server (stdio child process, streamable HTTP, or
the deprecated HTTP+SSE transport of 2024-11-05 servers).

A transport only opens the message streams; `connection.open_connection` puts an MCP
`ClientSession` on top. To add a kind, subclass `McpTransport`, implement `streams()`, and add it
to `TRANSPORTS` under the `McpServer.transport` value that selects it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import tempfile
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from playground.mcp_servers.oauth import grant_marker, provider_for
from playground.mcp_servers.protocol_eras import DEFAULT_PROTOCOL_ERA
from playground.mcp_servers.secrets import command_basename, mask_args, mask_url, viewer_url

# How much of a stdio server's stderr is quoted in an error message.
STDERR_TAIL_CHARS = 1500


@dataclass(frozen=True)
class ServerConfig:
    """Everything needed to reach one server; built from an `McpServer` row, hashable by content."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    protocol_era: str = DEFAULT_PROTOCOL_ERA  # McpServer.ProtocolEra: "legacy", "auto" or a modern version
    # A remote server's OAuth grant (oauth.py): its row's id, and (redirect URI, connected at) while
    # it holds one — the tokens themselves stay in the database, sealed, and never ride here.
    server_id: int = 0
    oauth: tuple[str, ...] = ()

    @classmethod
    def from_server(cls, server: Any) -> ServerConfig:
        return cls(
            name=server.name,
            transport=server.transport,
            command=server.command or "",
            args=tuple(str(a) for a in (server.args or [])),
            env={str(k): str(v) for k, v in (server.env or {}).items()},
            url=server.url or "",
            headers={str(k): str(v) for k, v in (server.headers or {}).items()},
            protocol_era=getattr(server, "protocol_era", "") or DEFAULT_PROTOCOL_ERA,
            server_id=getattr(server, "pk", None) or 0,
            oauth=grant_marker(server),
        )

    @property
    def fingerprint(self) -> str:
        """Changes whenever the way to reach the server changes: a pooled session is keyed on it."""
        payload = json.dumps(
            [self.transport, self.command, list(self.args), dict(self.env), self.url, dict(self.headers),
             self.protocol_era, *([list(self.oauth)] if self.oauth else [])],
            sort_keys=True,
        )
        return hashlib.sha1(payload.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """Where the server is, for admins: env and header values left out; URL credentials, query
        values, path keys and secret arguments masked."""
        if self.transport == "stdio":
            return "stdio: " + shlex.join([self.command, *mask_args(self.args)])
        return f"{self.transport_label}: {mask_url(self.url)}"

    def describe_briefly(self) -> str:
        """Where the server is, as every role may see it (error messages, logs, conversation
        events): the program's file name, or the URL's scheme and host."""
        if self.transport == "stdio":
            return f"stdio: {command_basename(self.command)}"
        return f"{self.transport_label}: {viewer_url(self.url)}"

    @property
    def transport_label(self) -> str:
        return "SSE (deprecated)" if self.transport == "sse" else "streamable HTTP"


class McpTransport(ABC):
    """Opens the message streams to one server.

    `streams()` is an async context manager yielding the `(read_stream, write_stream)` pair that
    `mcp.ClientSession` takes. Leaving it must release everything it acquired — for stdio, the
    child process is stopped and reaped — also when the body raised or was cancelled.
    `diagnostics()` may add context to an error message (stdio: the tail of the server's stderr).
    """

    kind: ClassVar[str]
    # Whether the server's stderr is ours to read (a child we started) or not (a server elsewhere).
    has_stderr: ClassVar[bool] = False

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        # Told of what happens on the wire that the server's own log would not show (an HTTP
        # session opened, an error status): `(kind, text)`, kind "session" or "error".
        self.on_event: Callable[[str, str], None] | None = None

    def note(self, kind: str, text: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, text)

    @abstractmethod
    def streams(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        ...

    def diagnostics(self) -> str:
        return ""

    def read_stderr(self, offset: int) -> tuple[str, int]:
        """What the server wrote to stderr since `offset`, and the new offset (no stderr: nothing)."""
        return "", offset


class StdioTransport(McpTransport):
    """Starts the server as a child process (its own session, so the SDK can kill the whole tree)."""

    kind = "stdio"
    has_stderr = True

    def __init__(self, config: ServerConfig) -> None:
        super().__init__(config)
        self._stderr = None

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        if not self.config.command:
            raise ValueError("no command configured for this stdio server")
        params = StdioServerParameters(command=self.config.command, args=list(self.config.args), env=dict(self.config.env))
        # stderr goes to a file we can quote when the server fails to start or dies.
        with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as stderr:
            self._stderr = stderr
            try:
                async with stdio_client(params, errlog=stderr) as pair:
                    yield pair
            finally:
                self._stderr_tail = self._read_stderr_tail()
                self._stderr = None

    def _read_stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()
        except (OSError, ValueError):
            return ""
        return text[-STDERR_TAIL_CHARS:].strip()

    MAX_READ_BYTES = 64 * 1024

    def read_stderr(self, offset: int) -> tuple[str, int]:
        # pread leaves the shared file offset alone: the child writes through the same open file.
        if self._stderr is None:
            return "", offset
        try:
            self._stderr.flush()
            data = os.pread(self._stderr.fileno(), self.MAX_READ_BYTES, offset)
        except (OSError, ValueError):
            return "", offset
        return data.decode("utf-8", errors="replace"), offset + len(data)

    def diagnostics(self) -> str:
        tail = self._read_stderr_tail() if self._stderr is not None else getattr(self, "_stderr_tail", "")
        return f"server stderr (last lines):\n{tail}" if tail else ""


class StreamableHttpTransport(McpTransport):
    """Talks to a running server over streamable HTTP, sending the configured headers, and its OAuth
    grant's access token when it holds one (the SDK's provider refreshes it when it expires)."""

    kind = "http"

    # Connect quickly (a refused or unreachable URL should fail fast); reads stay long for SSE streams.
    connect_timeout = 10.0
    read_timeout = 300.0

    def __init__(self, config: ServerConfig) -> None:
        super().__init__(config)
        # Set by whoever opens the connection to run an interactive sign-in (oauth_connect.py);
        # otherwise the stored grant's provider, if the server has one.
        self.auth: httpx2.Auth | None = None
        # The server's `WWW-Authenticate` when it answered 401: it wants OAuth (the page offers Connect).
        self.auth_challenge = ""

    def http_auth(self) -> httpx2.Auth | None:
        """The auth this connection sends through (kept as `auth`: its failure explains a 401)."""
        if self.auth is None and self.config.oauth and self.config.server_id:
            self.auth = provider_for(self.config.server_id, self.config.url, self.config.oauth[0])
        return self.auth

    def http_client(self, headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers if headers is not None else dict(self.config.headers),
            timeout=timeout or httpx2.Timeout(self.connect_timeout, read=self.read_timeout),
            auth=auth, event_hooks={"response": [self._watch_response]},
        )

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        if not self.config.url:
            raise ValueError("no URL configured for this streamable HTTP server")
        async with self.http_client(auth=self.http_auth()) as client:
            async with streamable_http_client(connect_url(self.config), http_client=client) as pair:
                yield pair


    _session_id = ""

    async def _watch_response(self, response: httpx2.Response) -> None:
        """An HTTP server has no stderr for us: its session and its error statuses go to the log instead."""
        session_id = response.headers.get("mcp-session-id", "")
        if session_id and session_id != self._session_id:
            # The id is the session's key on the server: only its start is shown.
            self.note("session", f"the server opened session {session_id[:8]}…" if not self._session_id
                      else f"the server moved to session {session_id[:8]}…")
            self._session_id = session_id
        if response.status_code >= 400:
            request = response.request
            if response.status_code == 401 and response.headers.get("www-authenticate"):
                self.auth_challenge = response.headers["www-authenticate"][:500]
            self.note("error", f"HTTP {response.status_code} {response.reason_phrase} for {request.method} {mask_url(str(request.url))}")


class SseTransport(StreamableHttpTransport):
    """The HTTP+SSE transport of 2024-11-05 (a GET event stream, messages POSTed to the endpoint it
    names), through the SDK's `sse_client`: deprecated by MCP since 2025-03-26, accepted for servers
    that never moved to streamable HTTP. Headers and OAuth as for streamable HTTP."""

    kind = "sse"

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        if not self.config.url:
            raise ValueError("no URL configured for this SSE server")
        async with sse_client(
            connect_url(self.config), headers=dict(self.config.headers), timeout=self.connect_timeout,
            sse_read_timeout=self.read_timeout, httpx_client_factory=self.http_client, auth=self.http_auth(),
        ) as pair:
            yield pair


def connect_url(config: ServerConfig) -> str:
    """The URL to connect to. A configured Authorization header wins over credentials in the URL
    (the HTTP client would otherwise replace the header with Basic auth from the userinfo)."""
    if not any(str(name).lower() == "authorization" for name in config.headers):
        return config.url
    try:
        parts = urlsplit(config.url)
    except ValueError:
        return config.url
    if "@" not in parts.netloc:
        return config.url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


TRANSPORTS: dict[str, type[McpTransport]] = {
    StdioTransport.kind: StdioTransport,
    StreamableHttpTransport.kind: StreamableHttpTransport,
    SseTransport.kind: SseTransport,
}


def transport_for(config: ServerConfig) -> McpTransport:
    try:
        return TRANSPORTS[config.transport](config)
    except KeyError:
        raise ValueError(f"unknown transport {config.transport!r} (known: {', '.join(TRANSPORTS)})") from None
