"""Noting every JSON-RPC message that crosses an MCP client's transport (the Protocol view's
capture, protocol_log.py): `RecordingStreams` wraps the (read, write) pair a transport gives
`ClientSession`. No Django here: connection.py uses it and stays usable without settings."""
from __future__ import annotations

from typing import Any, Protocol

import anyio

CLIENT, SERVER = "client", "server"


class MessageNoter(Protocol):
    """Told of each message, on the event loop; must be cheap and never raise."""

    def note(self, sender: str, message: dict[str, Any], *, version_hint: str = "") -> None: ...

    async def settle(self) -> None:
        """Write what was noted so far (the connection closes)."""


def as_plain(message: Any) -> dict[str, Any]:
    """A JSON-RPC message object of the SDK as a plain dict, sharing its params/result (no copy)."""
    plain: dict[str, Any] = {"jsonrpc": "2.0"}
    for name in ("id", "method", "params", "result"):
        value = getattr(message, name, None)
        if value is not None:
            plain[name] = value
    if getattr(message, "error", None) is not None:
        plain["id"] = getattr(message, "id", None)
        plain["error"] = message.error  # an ErrorData model: dumped when written
    return plain


class RecordingStreams:
    """The (read, write) pair of a transport with each JSON-RPC message noted in a `Transcript`:
    what the client sends through `write`, what the server sends through `read`."""

    def __init__(self, transcript: MessageNoter, read_stream: Any, write_stream: Any) -> None:
        self.read = _RecordingRead(read_stream, transcript)
        self.write = _RecordingWrite(write_stream, transcript)


class _RecordingRead:
    def __init__(self, inner: Any, transcript: MessageNoter) -> None:
        self._inner = inner
        self._transcript = transcript

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        item = await self._inner.receive()
        message = getattr(item, "message", None)
        if message is not None:
            self._transcript.note(SERVER, as_plain(message))
        return item

    def __aiter__(self) -> _RecordingRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _RecordingRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)


class _RecordingWrite:
    def __init__(self, inner: Any, transcript: MessageNoter) -> None:
        self._inner = inner
        self._transcript = transcript

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any, /) -> None:
        message = getattr(item, "message", None)
        if message is not None:
            self._transcript.note(CLIENT, as_plain(message))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _RecordingWrite:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)
