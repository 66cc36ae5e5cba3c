"""The gateway's side of the Protocol view: each HTTP exchange on `/gateway/mcp/<profile>/` noted
message by message — the client's JSON-RPC body, and the gateway's answer, a JSON body or an SSE
stream of events — in the transcript of the session it belongs to (mcp_servers/protocol_log.py).

The session is found when the messages are written (in a thread, not on the request's way): a
legacy client's by its `Mcp-Session-Id` (the request's, or the one `initialize` was answered
with), a 2026-07-28 client's by its token and the client name its request carries in `_meta`
(the row `server._stateless_session` gathers its requests in). MRTR rounds of one client come as
separate HTTP requests: the grouper is kept per token (the newest `GROUPERS` tokens per process).
"""
from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import Any

from mcp_types import CLIENT_INFO_META_KEY

from playground.gateway.models import GatewaySession
from playground.mcp_servers import protocol_log
from playground.mcp_servers.wire_capture import CLIENT, SERVER

logger = logging.getLogger(__name__)

GROUPERS = 256
# A body or an SSE event larger than this is noted as its size only (the gateway never parses it twice).
MAX_NOTED_BYTES = 1024 * 1024

_groupers: OrderedDict[int, protocol_log.Grouper] = OrderedDict()


def _grouper_for(token_id: int) -> protocol_log.Grouper:
    grouper = _groupers.pop(token_id, None) or protocol_log.Grouper()
    _groupers[token_id] = grouper
    while len(_groupers) > GROUPERS:
        _groupers.popitem(last=False)
    return grouper


class GatewayExchange:
    """One HTTP request to the gateway and its answer, noted in the transcript of their session."""

    def __init__(self, profile_id: int, token_id: int, headers: dict[str, str]) -> None:
        self.profile_id = profile_id
        self.token_id = token_id
        self.session_id = headers.get("mcp-session-id", "")
        self.version_hint = headers.get("mcp-protocol-version", "")
        self.client_name = ""
        self._scope: str | None = None
        self.transcript = protocol_log.Transcript(self._find_scope, [], _grouper_for(token_id))
        self._streaming = False
        self._buffer = b""
        self._skipping = False

    # -- the request -------------------------------------------------------------------------------
    def request_body(self, body: bytes) -> None:
        if len(body) > MAX_NOTED_BYTES:
            self._note(CLIENT, {"jsonrpc": "2.0", "note": f"a body of {len(body)} bytes, not kept"})
            return
        try:
            parsed = json.loads(body)
        except ValueError:
            return  # the endpoint answered it already (parse error)
        for message in parsed if isinstance(parsed, list) else [parsed]:
            if isinstance(message, dict):
                if not self.client_name:
                    meta = (message.get("params") or {}).get("_meta") if isinstance(message.get("params"), dict) else None
                    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
                    if isinstance(info, dict) and isinstance(info.get("name"), str):
                        self.client_name = info["name"][:200]
                self._note(CLIENT, message)

    # -- the answer --------------------------------------------------------------------------------
    def watch(self, send):
        """`send` with the answer's messages noted as they go out."""

        async def watching(message: dict[str, Any]) -> None:
            try:
                self._seen(message)
            except Exception:  # a transcript must never break the answer it watches
                logger.debug("gateway transcript: could not note an answer", exc_info=True)
            await send(message)

        return watching

    def _seen(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
            self.session_id = headers.get("mcp-session-id") or self.session_id
            self._streaming = headers.get("content-type", "").startswith("text/event-stream")
            return
        if message["type"] != "http.response.body":
            return
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        if self._streaming:
            self._events(chunk)
            return
        if not self._skipping:
            self._buffer += chunk
            if len(self._buffer) > MAX_NOTED_BYTES:
                self._skipping, self._buffer = True, b""
        if not more:
            if self._skipping:
                self._note(SERVER, {"jsonrpc": "2.0", "note": f"an answer over {MAX_NOTED_BYTES} bytes, not kept"})
            elif self._buffer.strip():
                try:
                    parsed = json.loads(self._buffer)
                except ValueError:
                    parsed = None
                for item in parsed if isinstance(parsed, list) else [parsed]:
                    if isinstance(item, dict):
                        self._note(SERVER, item)
            self._buffer = b""

    def _events(self, chunk: bytes) -> None:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            event, self._buffer = self._buffer.split(b"\n\n", 1)
            data = b"\n".join(line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:"))
            if not data.strip():
                continue
            try:
                parsed = json.loads(data)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                self._note(SERVER, parsed)
        if len(self._buffer) > MAX_NOTED_BYTES:  # an event that never ends: dropped, not held
            self._buffer = b""
            self._note(SERVER, {"jsonrpc": "2.0", "note": f"an event over {MAX_NOTED_BYTES} bytes, not kept"})

    def _note(self, sender: str, message: dict[str, Any]) -> None:
        self.transcript.note(sender, message, version_hint=self.version_hint)

    # -- where it is written (in the writer's thread) ------------------------------------------------
    def _find_scope(self) -> str | None:
        if self._scope is None:
            if self.session_id:
                pk = GatewaySession.objects.filter(session_id=self.session_id).values_list("pk", flat=True).first()
            else:
                rows = GatewaySession.objects.filter(stateless=True, profile_id=self.profile_id, token_id=self.token_id,
                                                     client_name=self.client_name).order_by("-last_seen_at")
                pk = (rows.filter(closed_at__isnull=True).values_list("pk", flat=True).first()
                      or rows.values_list("pk", flat=True).first())
            self._scope = protocol_log.gateway_scope(pk) if pk is not None else None
        return self._scope


def exchange_for(profile_id: int, token_id: int, headers: dict[str, str]) -> GatewayExchange | None:
    """A new exchange to note, or None when the Protocol view's capture is off."""
    if protocol_log.keep_messages() <= 0:
        return None
    return GatewayExchange(profile_id, token_id, headers)
