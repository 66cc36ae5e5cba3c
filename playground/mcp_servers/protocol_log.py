"""The Protocol view's transcript: every JSON-RPC message between us and an MCP server (our client's
connections) or between an MCP client and the gateway, in order, both directions.

Captured where the messages cross the transport: `wire_capture.RecordingStreams` wraps the read and write
streams a `ClientSession` gets (connection.open_connection); the gateway's endpoint hands its HTTP
bodies to a `Transcript` of its own (gateway/transcript.py). Capturing costs the event loop a
dict per message and a list append: the messages are grouped there (`Grouper`, no copying), and
turned into JSON, scrubbed with the project's one scrubber (`secrets.scrub`), cut and stored by
`TranscriptWriter` in batches, in a thread of the loop, every `FLUSH_SECONDS`. Storage is bounded
twice: the newest `MCP_PROTOCOL_KEEP_MESSAGES` per scope (a server, a gateway session) are kept,
each body at most `MCP_PROTOCOL_MAX_BODY_CHARS`; messages waiting to be written are at most
`MAX_PENDING` per process (past that they are counted, not held). `MCP_PROTOCOL_KEEP_MESSAGES=0`
turns capture off.

A multi round-trip request (2026-07-28 MRTR) is one JSON-RPC request per round: the server answers
`InputRequiredResult` (`resultType: "input_required"`, with `requestState`), the client sends the
request again with `inputResponses` and the same `requestState`. `Grouper` files each round under
the first request's group, with its round number, so the page shows them together.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from django.conf import settings
from django.db import connections

from mcp_types import PROTOCOL_VERSION_META_KEY

from playground.mcp_servers.models import McpProtocolMessage
from playground.mcp_servers.protocol_names import era_label
from playground.mcp_servers.wire_capture import CLIENT, SERVER
from playground.mcp_servers.secrets import known_secrets, scrub

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.25
MAX_PENDING = 5000  # messages waiting to be written, per process
# How many requests (and MRTR states) a grouper remembers to pair answers and rounds with.
REMEMBERED_REQUESTS = 512
TOTAL_CHECK_EVERY = 1000

REQUEST, RESPONSE, INPUT_REQUIRED, ERROR, NOTIFICATION = "request", "response", "input_required", "error", "notification"

def server_scope(server_id: int) -> str:
    return f"server-{server_id}"


def gateway_scope(session_pk: int) -> str:
    return f"gateway-{session_pk}"


def keep_messages() -> int:
    return max(0, int(getattr(settings, "MCP_PROTOCOL_KEEP_MESSAGES", 500)))


@dataclass
class Captured:
    """One message as it crossed the wire, before it is written: `message` is the JSON-RPC object
    as plain data (its params or result are the SDK's own dicts, not copies)."""

    sender: str
    kind: str
    method: str
    rpc_id: str
    group: str
    round: int
    protocol_version: str
    message: Any
    at: float = field(default_factory=time.time)


def _bounded_put(mapping: OrderedDict, key: Any, value: Any) -> None:
    mapping[key] = value
    mapping.move_to_end(key)
    while len(mapping) > REMEMBERED_REQUESTS:
        mapping.popitem(last=False)


class Grouper:
    """Classifies messages of one conversation (a connection, a gateway token's sessions) and files
    MRTR rounds under their first request. Runs on the event loop: reads a few keys, copies nothing."""

    def __init__(self) -> None:
        self.requests: OrderedDict[tuple[str, str], tuple[str, int, str, str]] = OrderedDict()  # → group, round, method, version
        self.rounds: OrderedDict[str, tuple[str, int]] = OrderedDict()  # requestState (or "method:<m>") → group, round
        self.version = ""  # what the last initialize settled on (legacy requests carry no version)

    def capture(self, sender: str, message: dict[str, Any], *, version_hint: str = "") -> Captured:
        rpc_id = message.get("id")
        rpc_key = "" if rpc_id is None else str(rpc_id)
        method = message.get("method")
        other = SERVER if sender == CLIENT else CLIENT
        if isinstance(method, str):
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            version = self._version_of(params) or version_hint or self.version
            if rpc_id is None:
                group = ""
                cancelled = params.get("requestId") if method == "notifications/cancelled" else None
                if cancelled is not None and (sender, str(cancelled)) in self.requests:
                    group = self.requests[(sender, str(cancelled))][0]
                return Captured(sender, NOTIFICATION, method, "", group, 0, version, message)
            state = params.get("requestState")
            earlier = None
            if isinstance(state, str) and state in self.rounds:
                earlier = self.rounds.pop(state)
            elif "inputResponses" in params and f"method:{method}" in self.rounds:
                earlier = self.rounds.pop(f"method:{method}")
            group, round_number = (earlier[0], earlier[1] + 1) if earlier else (f"{sender}:{rpc_key}", 0)
            _bounded_put(self.requests, (sender, rpc_key), (group, round_number, method, version))
            return Captured(sender, REQUEST, method, rpc_key, group, round_number, version, message)
        group, round_number, method, version = self.requests.get((other, rpc_key), ("", 0, "", version_hint or self.version))
        if "error" in message:
            return Captured(sender, ERROR, method, rpc_key, group, round_number, version, message)
        result = message.get("result") if isinstance(message.get("result"), dict) else {}
        if method == "initialize" and isinstance(result.get("protocolVersion"), str):
            self.version = version = result["protocolVersion"]
        if result.get("resultType") == "input_required":
            state = result.get("requestState")
            _bounded_put(self.rounds, state if isinstance(state, str) else f"method:{method}", (group, round_number))
            return Captured(sender, INPUT_REQUIRED, method, rpc_key, group, round_number, version, message)
        return Captured(sender, RESPONSE, method, rpc_key, group, round_number, version, message)

    @staticmethod
    def _version_of(params: dict[str, Any]) -> str:
        meta = params.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(PROTOCOL_VERSION_META_KEY), str):
            return meta[PROTOCOL_VERSION_META_KEY]
        version = params.get("protocolVersion")  # initialize (and server/discover's answer)
        return version if isinstance(version, str) else ""


# --- writing: batched, off the event loop -----------------------------------------------------------


def _body_text(message: Any, secrets: list[str], limit: int) -> str:
    text = json.dumps(message, ensure_ascii=False, default=_jsonable)
    if len(text) <= limit:
        return scrub(text, secrets)
    # Scrubbed a little past the cut, so a secret across it is masked whole, not half shown.
    return scrub(text[:limit + 512], secrets)[:limit] + f"\n… ({len(text) - limit} more characters not kept)"


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(by_alias=True, mode="json", exclude_none=True)
    return str(value)


def store(scope: str, captured: list[Captured], secrets: list[str]) -> list[McpProtocolMessage]:
    """Scrub, cut and store a batch of one scope; trim the scope to the newest it keeps."""
    keep = keep_messages()
    if not captured or keep <= 0:
        return []
    limit = max(1000, int(getattr(settings, "MCP_PROTOCOL_MAX_BODY_CHARS", 20_000)))
    rows = McpProtocolMessage.objects.bulk_create(
        McpProtocolMessage(scope=scope, sender=c.sender, kind=c.kind, method=c.method[:100], rpc_id=c.rpc_id[:100],
                           group=c.group[:120], round=c.round, protocol_version=c.protocol_version[:40],
                           body=_body_text(c.message, secrets, limit), at=c.at)
        for c in captured[-keep:]
    )
    oldest_kept = McpProtocolMessage.objects.filter(scope=scope).order_by("-id").values_list("id", flat=True)[keep - 1:keep]
    if oldest_kept:
        McpProtocolMessage.objects.filter(scope=scope, id__lt=oldest_kept[0]).delete()
    _bound_the_table(rows)
    return rows


def _bound_the_table(rows: list[McpProtocolMessage]) -> None:
    """Every scope is bounded, but scopes come and go (a stateless gateway client gets a new session
    row after each idle spell): the table keeps the newest MCP_PROTOCOL_KEEP_TOTAL messages of all.
    Checked each time the ids pass a multiple of TOTAL_CHECK_EVERY: one delete on the primary key."""
    first, last = rows[0].pk if rows else None, rows[-1].pk if rows else None
    if first is None or last is None or (first - 1) // TOTAL_CHECK_EVERY == last // TOTAL_CHECK_EVERY:
        return
    total = max(keep_messages(), int(getattr(settings, "MCP_PROTOCOL_KEEP_TOTAL", 100_000)))
    McpProtocolMessage.objects.filter(id__lte=last - total).delete()


class TranscriptWriter:
    """One event loop's queue of captured messages, written every FLUSH_SECONDS by a task of that
    loop (the database work in the loop's thread pool). One per loop: the gateway's (Daphne's) and
    the MCP client's (`per_process.portal()`) each flush their own."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], str | None], list[str], Captured]] = []
        self.dropped = 0
        self._flushing: asyncio.Task | None = None

    def add(self, scope_of: Callable[[], str | None], secrets: list[str], captured: Captured) -> None:
        """Called on this writer's loop."""
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self.pending.append((scope_of, secrets, captured))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush_while_pending())

    def _take(self) -> list[tuple[Callable[[], str | None], list[str], Captured]]:
        batch, self.pending = self.pending, []
        return batch

    async def _flush_while_pending(self) -> None:
        # Until a wait finds nothing new: between that check and the task's end nothing can be
        # added (same loop, no await), so nothing is left behind unwritten.
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            batch = self._take()
            if not batch:
                return
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.write, batch)

    def write(self, batch: list[tuple[Callable[[], str | None], list[str], Captured]], *, close_connections: bool = True) -> None:
        if self.dropped:
            logger.warning("MCP protocol transcript: %d messages were not kept (over %d waiting)", self.dropped, MAX_PENDING)
            self.dropped = 0
        by_scope: dict[str, tuple[list[str], list[Captured]]] = {}
        try:
            for scope_of, secrets, captured in batch:
                scope = scope_of()
                if scope:
                    by_scope.setdefault(scope, (secrets, []))[1].append(captured)
            for scope, (secrets, items) in by_scope.items():
                store(scope, items, secrets)
        except Exception:
            logger.warning("could not store %d MCP protocol messages", len(batch), exc_info=True)
        finally:
            if close_connections:  # a thread of the loop's pool: give its database connection back
                connections.close_all()

    async def drain(self) -> None:
        """Write what is waiting now (a connection that closes; tests). A caller that stops waiting
        (a bounded close) leaves the write to finish in its thread."""
        batch = self._take()
        if batch:
            await anyio.to_thread.run_sync(self.write, batch, abandon_on_cancel=True)


_writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TranscriptWriter] = weakref.WeakKeyDictionary()


def writer() -> TranscriptWriter | None:
    """The running loop's writer (None in sync code, which writes at once: `add_now`)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    found = _writers.get(loop)
    if found is None:
        found = _writers[loop] = TranscriptWriter()
    return found


def add_now(scope_of: Callable[[], str | None], secrets: list[str], captured: Captured) -> None:
    """No loop (sync code): written at once, on the caller's own database connection."""
    TranscriptWriter().write([(scope_of, secrets, captured)], close_connections=False)


class Transcript:
    """What one conversation's capture needs: its scope (known, or found when written), its
    secrets and its grouper. `note` is called on the event loop for each message."""

    def __init__(self, scope_of: Callable[[], str | None], secrets: list[str], grouper: Grouper | None = None) -> None:
        self.scope_of = scope_of
        self.secrets = secrets
        self.grouper = grouper if grouper is not None else Grouper()

    def note(self, sender: str, message: dict[str, Any], *, version_hint: str = "") -> None:
        try:
            captured = self.grouper.capture(sender, message, version_hint=version_hint)
        except Exception:  # a transcript must never break the conversation it watches
            logger.debug("MCP protocol transcript: could not classify a message", exc_info=True)
            return
        loop_writer = writer()
        if loop_writer is None:
            add_now(self.scope_of, self.secrets, captured)
        else:
            loop_writer.add(self.scope_of, self.secrets, captured)

    async def settle(self) -> None:
        loop_writer = writer()
        if loop_writer is not None:
            await loop_writer.drain()


def transcript_for_server(server_id: int, secrets_of: Any) -> Transcript | None:
    """The transcript of a registered server's connections (None when capture is off)."""
    if keep_messages() <= 0:
        return None
    scope = server_scope(server_id)
    return Transcript(lambda: scope, known_secrets(secrets_of))


# --- reading: the page and the export ---------------------------------------------------------------


@dataclass
class Exchange:
    """A request with its answer, and for an MRTR request every round under it; or a lone notification."""

    group: str
    messages: list[McpProtocolMessage]

    @property
    def first(self) -> McpProtocolMessage:
        return self.messages[0]

    @property
    def rounds(self) -> int:
        return max(m.round for m in self.messages)


def transcript(scope: str) -> list[McpProtocolMessage]:
    return list(McpProtocolMessage.objects.filter(scope=scope).order_by("id"))


def exchanges(messages: list[McpProtocolMessage]) -> list[Exchange]:
    """The transcript in order of first appearance, each request's messages (all its rounds) together."""
    shown: list[Exchange] = []
    by_group: dict[str, Exchange] = {}
    for message in messages:
        if message.group and message.group in by_group:
            by_group[message.group].messages.append(message)
            continue
        exchange = Exchange(message.group, [message])
        shown.append(exchange)
        if message.group:
            by_group[message.group] = exchange
    return shown


def export(scope: str) -> list[dict[str, Any]]:
    """The transcript as JSON (the page's download): each message as stored, scrubbed."""
    out = []
    for m in transcript(scope):
        try:
            body: Any = json.loads(m.body)
        except ValueError:  # cut: kept as text
            body = m.body
        out.append({"at": m.at, "sender": m.sender, "kind": m.kind, "method": m.method, "id": m.rpc_id,
                    "group": m.group, "round": m.round, "protocol_version": m.protocol_version,
                    "era": era_label(m.protocol_version), "message": body})
    return out


def forget(scope: str) -> None:
    McpProtocolMessage.objects.filter(scope=scope).delete()
