"""The one event schema: the loop emits these, the database stores them, the browser renders them.

Each event type is a dataclass whose fields become the saved payload. `record_event` is the only
way an event enters the world: it takes the next per-conversation sequence number under a row
lock, saves the row, and broadcasts it (rendered once, as the frame every watching socket forwards)
after the transaction commits — so a page that reloads (or a socket that reconnects) and a page that
is watching live see exactly the same rows, in order.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from django.db import transaction
from django.db.models import F

from playground.conversations.broadcast import broadcast_event
from playground.conversations.models import Conversation, Event
from playground.mcp_servers.secrets import scrub
from playground.prompt_cards import tell_prompt_inbox
from playground.sequences import increment

# Payloads stay small at any catalog size: a 50,000-tool turn listed every deferred name (2 MB), and
# its frame broke the WebSocket server's 1 MiB limit. Lists of names keep the first few and a count;
# long texts keep their head and their length.
NAMES_KEPT = 200
TEXT_KEPT = 64 * 1024
MAX_PAYLOAD_BYTES = 256 * 1024


def bounded_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, or (above MAX_PAYLOAD_BYTES, e.g. a tool that returned megabytes) a copy whose
    long strings keep their head and long lists their first NAMES_KEPT items, marked `truncated`."""
    if _size(payload) <= MAX_PAYLOAD_BYTES:
        return payload

    def shrink(value: Any, limit: int) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[:limit] + f"… ({len(value) - limit:,} more characters not stored)"
        if isinstance(value, list):
            return [shrink(item, limit) for item in value[:NAMES_KEPT]]
        if isinstance(value, dict):
            return {key: shrink(item, limit) for key, item in value.items()}
        return value

    for limit in (16_384, 4_096, 1_024, 256, 64):
        smaller = shrink(payload, limit)
        if _size(smaller) <= MAX_PAYLOAD_BYTES:
            break
    return {**smaller, "truncated": True}


def _size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, ensure_ascii=False, default=str).encode())


def kept_names(names: list[str]) -> list[str]:
    return list(names[:NAMES_KEPT])


def kept_text(text: str) -> str:
    if len(text) <= TEXT_KEPT:
        return text
    return text[:TEXT_KEPT] + f"\n… ({len(text) - TEXT_KEPT:,} more characters not stored; the request carried them all)"


@dataclass
class LoopEvent:
    """Base of all event types. `type` is the stored `Event.type` and picks the template."""

    type: ClassVar[str] = ""

    def to_payload(self) -> dict[str, Any]:
        # The fields as they are (lists, dicts, strings): `asdict` would deep-copy every nested
        # structure of every event, and the payload is only serialised and rendered, never changed.
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class TurnStarted(LoopEvent):
    """One model round trip begins: what the model is offered and why (the mode decision)."""

    type: ClassVar[str] = "turn_started"
    turn: int  # 1-based within this run
    provider: str
    model: str
    wire: str  # the wire style's one name (TurnPlan.wire: native, client, server, openai-…); events saved
    # before it carry `wire_style` (the planned style) instead, which the pages and selectors still read
    loaded_tools: list[str] = field(default_factory=list)  # every tool the request carried (loaded + ToolSearch + discovered)
    deferred_tools: list[str] = field(default_factory=list)  # undiscovered: names only (announcement)
    loaded_count: int = -1  # the full counts; the lists above keep their first NAMES_KEPT names
    deferred_count: int = -1
    discovered_tools: list[str] = field(default_factory=list)  # recovered from the history
    tokens: dict[str, Any] = field(default_factory=dict)  # engine RequestPlan.tokens: sent vs all-tools baseline
    decision: dict[str, Any] = field(default_factory=dict)  # engine ModeDecision.to_dict()
    subagent: str = ""  # name of the subagent running this turn, empty for the main agent
    server_search: str = ""  # bm25 / regex when Anthropic's server-side search replaces ToolSearch

    def __post_init__(self) -> None:
        if self.loaded_count < 0:
            self.loaded_count = len(self.loaded_tools)
        if self.deferred_count < 0:
            self.deferred_count = len(self.deferred_tools)
        self.loaded_tools, self.deferred_tools = kept_names(self.loaded_tools), kept_names(self.deferred_tools)


@dataclass
class AnnouncementSent(LoopEvent):
    type: ClassVar[str] = "announcement_sent"
    style: str  # full | delta
    text: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    layout: str = "flat"  # flat | grouped | budgeted: the layout sent
    reason: str = ""  # why it is not the profile's layout (a list that would not fit the window)
    text_chars: int = -1  # the whole text's length; `text` keeps its first TEXT_KEPT characters

    def __post_init__(self) -> None:
        if self.text_chars < 0:
            self.text_chars = len(self.text)
        self.text = kept_text(self.text)
        self.added, self.removed = kept_names(self.added), kept_names(self.removed)


@dataclass
class ModelRequest(LoopEvent):
    type: ClassVar[str] = "model_request"
    provider: str
    model: str
    message_count: int
    tool_count: int
    request: dict[str, Any] = field(default_factory=dict)  # a summary of the wire request (no secrets)
    body: dict[str, Any] = field(default_factory=dict)  # the request body itself (request_body(): bounded, no secrets)

    def to_payload(self) -> dict[str, Any]:
        # The body is kept whole or not at all: shortened by bounded_payload it would no longer be
        # the body that was sent. When the event would go over the limit, the body becomes the note.
        payload = LoopEvent.to_payload(self)
        if self.body and not self.body.get("too_large") and _size(payload) > MAX_PAYLOAD_BYTES:
            payload["body"] = _body_note(_size(self.body))
        return payload


# What a model request event may keep of the body: a 200-tool catalog with long schemas is ~100 KB; past
# this the row (and every socket frame replaying it) gets heavy, so a note with the size is kept instead.
MAX_STORED_BODY_BYTES = MAX_PAYLOAD_BYTES
# Keys that carry credentials or transport headers (SDK kwargs such as extra_headers, an MCP connector's
# authorization_token): a stored body is shown to every viewer of the conversation, so they never go in.
_DROPPED_KEYS = frozenset({"extra_headers", "headers", "api_key", "extra_query", "extra_body", "timeout"})
_SECRET_KEY = re.compile(r"(api[_-]?key|authorization|secret|password|passwd|(^|_)token$)", re.IGNORECASE)


def _without_secrets(value: Any) -> Any:
    # Only string values are hidden: a tool schema's `api_key` property (a dict) stays as it was sent.
    if isinstance(value, dict):
        return {k: ("[not stored]" if isinstance(k, str) and isinstance(v, str) and _SECRET_KEY.search(k) else _without_secrets(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_secrets(v) for v in value]
    return value


# A key `_SECRET_KEY` finds, as JSON writes it before a string value: the word, the rest of the key,
# `": "`. Searched in the body's JSON with ASCII letters lowered (the same length, so any match is a
# real key's or a harmless false alarm). Four letters outside ASCII match an ASCII one under
# IGNORECASE (İ ı ſ and the Kelvin sign): a body holding one is checked the slow way.
_SECRET_WORDS = (b"api", b"authorization", b"secret", b"password", b"passwd", b"token")
_SECRET_PAIR = re.compile(rb"(?:api[_-]?key|authorization|secret|password|passwd|token)(?:[^\"\\]|\\.)*\": \"", re.DOTALL)
_FOLDS_TO_ASCII = tuple(c.encode() for c in "\u0130\u0131\u017f\u212a")
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def _may_hold_secrets(encoded: bytes) -> bool:
    """Whether a body's JSON may hold a string under a key that looks like a credential (False: none,
    so `_without_secrets` would return it unchanged)."""
    if any(fold in encoded for fold in _FOLDS_TO_ASCII):
        return True
    lowered = encoded.translate(_ASCII_LOWER)
    for word in _SECRET_WORDS:
        start = lowered.find(word)
        while start >= 0:
            if _SECRET_PAIR.match(lowered, start):
                return True
            start = lowered.find(word, start + 1)
    return False


def request_body(request: dict[str, Any]) -> dict[str, Any]:
    """The Messages API body as sent (model, system, tools, messages …), for the timeline's "request body".

    Transport options and anything that looks like a credential are left out; a body over
    MAX_STORED_BODY_BYTES is replaced by a note giving its size. The body is serialised once: when
    its JSON holds no key that looks like a credential (almost always) that JSON is the stored body's
    (and its size the note's); otherwise the body is copied without those values and serialised again.
    """
    sent = {k: v for k, v in request.items() if k not in _DROPPED_KEYS}
    encoded = json.dumps(sent, ensure_ascii=False, default=str).encode("utf-8")
    if _may_hold_secrets(encoded):
        encoded = json.dumps(_without_secrets(sent), ensure_ascii=False, default=str).encode("utf-8")
    if len(encoded) > MAX_STORED_BODY_BYTES:
        return _body_note(len(encoded))
    return json.loads(encoded)  # plain JSON types, as the JSONField will give them back


def _body_note(size: int) -> dict[str, Any]:
    return {"too_large": True, "size_bytes": size,
            "note": f"The request body was {size:,} bytes, over the {MAX_STORED_BODY_BYTES // 1024} KB kept per event; not stored."}


@dataclass
class ModelResponse(LoopEvent):
    type: ClassVar[str] = "model_response"
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)  # input / output / cache_read / cache_write
    content: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    # The model asked and the cache TTL its breakpoints asked for: what prices the call (registry/prices.py).
    # Older events lack them: their turn's model is read instead (selectors.call_cost).
    model: str = ""
    cache_ttl: str = ""
    # Whose figures `usage` holds: "reported" (the API's usage) or "estimate" (the engine's count,
    # when the provider has none: the offline demo agent). Older events: "".
    usage_source: str = ""


@dataclass
class CacheStrip(LoopEvent):
    """One request as the prompt cache saw it (the engine's cache model, `cache_strips.py`): its input
    tokens written to / read from the cache / uncached, where its prefix first differs from the previous
    request and why, the API's reported split beside it, and the same turn sent with every tool (cached)."""

    type: ClassVar[str] = "cache_strip"
    vendor: str  # anthropic | openai
    enabled: bool  # the request is cached (a profile's breakpoints; OpenAI: always)
    ttl: str
    model: str
    input_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    uncached_tokens: int
    prefix_break: dict[str, Any] = field(default_factory=dict)  # section, index, reason; {} = extends the previous
    first_request: bool = False
    cost_usd: float | None = None  # the input at cache prices (None: the model has no price)
    uncached_cost_usd: float | None = None  # the same input with nothing cached
    reported: dict[str, int] = field(default_factory=dict)  # the API's split, same keys; {} = none reported
    reported_by: str = "api"  # api | estimate (the offline demo agent's usage: the cache model's own figures)
    all_tools: dict[str, Any] = field(default_factory=dict)  # the all-tools baseline's split and cost, cached
    counter: str = ""  # what counted the tokens
    not_replayed: int = 0  # earlier requests whose body was not kept (too large): missing from the model
    sent_at: float = 0.0  # when it was sent (epoch seconds): a later run replays the cache from these
    history_messages: int = 0  # the engine's history length then: the all-tools baseline's replay


@dataclass
class ToolSearchQuery(LoopEvent):
    """A ToolSearch call: how the query was read, the ranking with breakdowns, what got loaded."""

    type: ClassVar[str] = "toolsearch_query"
    tool_use_id: str
    query: str
    backend: str
    reading: dict[str, Any] = field(default_factory=dict)
    scored: list[dict[str, Any]] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    already_loaded: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    total_deferred_tools: int = 0
    error: str = ""
    server_side: bool = False  # the vendor's own search answered (Anthropic's server_tool_use, OpenAI's hosted tool_search)
    notes: list[str] = field(default_factory=list)  # e.g. the index was being built and another answered
    simulated: bool = False  # the vendor's search as the offline demo agent plays it (notes say how)
    # The harness's prediction before the turn ("tool-changes" wire style): `loaded` were added by a
    # tool_addition system message, `removed` withdrawn by tool_removal; not a call of the model's.
    predicted: bool = False
    removed: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, tool_use_id: str, result: Any, **fields: Any) -> ToolSearchQuery:
        """The event of one search of ours (an engine `ToolSearchResult`): how the query was read, the
        ranking, what it loaded and why; `fields` replace or add to these."""
        data = result.to_dict()
        return cls(**{"tool_use_id": tool_use_id, "query": result.query, "backend": result.backend, "reading": data["reading"],
                      "scored": data["scored"], "loaded": list(result.matches), "already_loaded": data["already_loaded"],
                      "not_found": data["not_found"], "total_deferred_tools": result.total_deferred_tools,
                      "notes": list(result.notes), **fields})


@dataclass
class ToolCall(LoopEvent):
    type: ClassVar[str] = "tool_call"
    tool_use_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    permission: str = "allow"  # allow | ask | deny (the call-time decision)


@dataclass
class ToolResult(LoopEvent):
    type: ClassVar[str] = "tool_result"
    tool_use_id: str
    name: str
    content: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    duration_ms: float = 0.0
    simulated: bool = False
    error: str = ""
    # Why the call did not run or finish, as a code (engine/refusals.py); "" for a call that ran.
    refusal: str = ""

    def to_payload(self) -> dict[str, Any]:
        payload = LoopEvent.to_payload(self)
        if not self.refusal:  # a call that ran: kept as results were stored before codes
            del payload["refusal"]
        return payload


@dataclass
class PermissionPrompt(LoopEvent):
    type: ClassVar[str] = "permission_prompt"
    tool_use_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    timeout_seconds: float = 0.0


@dataclass
class PermissionAnswer(LoopEvent):
    type: ClassVar[str] = "permission_answer"
    prompt_sequence: int
    choice: str  # once | always | deny | timeout
    answered_by: str = ""
    note: str = ""


@dataclass
class Compaction(LoopEvent):
    type: ClassVar[str] = "compaction"
    summary: str
    compacted_messages: int
    carried_tools: list[str] = field(default_factory=list)
    tokens_before: int = 0
    threshold_tokens: int = 0


@dataclass
class ErrorEvent(LoopEvent):
    type: ClassVar[str] = "error"
    message: str
    kind: str = ""  # e.g. api_error, rate_limit, overloaded, timeout, internal
    status_code: int | None = None
    retryable: bool = False

    def __post_init__(self) -> None:
        # Whatever raised it (a provider, a server, a bug quoting its settings), no credential is stored.
        self.message = scrub(self.message)


@dataclass
class TurnFinished(LoopEvent):
    type: ClassVar[str] = "turn_finished"
    turn: int
    stop_reason: str
    status: str  # the conversation status after this turn (running | idle | failed ...)
    final: bool = False  # the run (one person's message) ended here
    reason: str = ""  # why the run ended: end_turn, max_turns, cancelled, error


@dataclass
class ChatMessage(LoopEvent):
    """Text for the chat side: what the person wrote and what the assistant answered."""

    type: ClassVar[str] = "message"
    role: str  # user | assistant
    text: str
    author: str = ""
    streamed: bool = False  # the text came first as text_delta events: this message replaces them on the page

    def to_payload(self) -> dict[str, Any]:
        payload = LoopEvent.to_payload(self)
        if not self.streamed:  # most messages: kept as they were stored before streaming
            del payload["streamed"]
        return payload


@dataclass
class TextDelta(LoopEvent):
    """Assistant text as the model produces it, before the turn's `message` holds all of it. The loop
    coalesces the model's pieces (one event per STREAM_FLUSH_SECONDS at most); the page grows an
    assistant bubble with them, and a reload joins the turn's deltas until its message arrives."""

    type: ClassVar[str] = "text_delta"
    text: str  # the text added since the previous delta of this reply
    offset: int = 0  # characters of this reply before `text` (0: the reply's first piece)


@dataclass
class StatusChanged(LoopEvent):
    """The conversation's status changed (running indicator, waiting for an answer, idle)."""

    type: ClassVar[str] = "status"
    status: str
    note: str = ""
    by: str = ""  # who asked for it (a cancel request), when a person did


@dataclass
class RunCancelled(LoopEvent):
    """The person cancelled the run: where it stopped, and the call it interrupted (if one was in flight).
    Shown in the chat and in the timeline; the conversation's status becomes "cancelled"."""

    type: ClassVar[str] = "cancelled"
    stage: str  # queued | model_call | tool_call | waiting_permission | between_steps
    interrupted: str = ""  # the model or the tool whose call was stopped midway, empty when none was
    requested_by: str = ""
    note: str = ""
    after_ms: float | None = None  # how long the interrupted call had run


@dataclass
class ActedForOwner(LoopEvent):
    """Someone other than the owner (an admin) sent a message, answered a prompt or cancelled here:
    recorded so the owner sees who acted in their conversation."""

    type: ClassVar[str] = "acted_for_owner"
    actor: str  # the username
    actor_role: str
    action: str  # sent a message | answered your permission prompt | cancelled the run
    detail: str = ""


EVENT_TYPES: dict[str, type[LoopEvent]] = {
    cls.type: cls
    for cls in (
        TurnStarted, AnnouncementSent, ModelRequest, ModelResponse, CacheStrip, ToolSearchQuery, ToolCall, ToolResult,
        PermissionPrompt, PermissionAnswer, Compaction, ErrorEvent, TurnFinished, ChatMessage, TextDelta, StatusChanged,
        ActedForOwner, RunCancelled,
    )
}


# Events that open or close a permission prompt (a cancel closes the one its run waited on).
INBOX_TYPES = ("permission_prompt", "permission_answer", "cancelled")


class RunReleased(Exception):
    """The run no longer owns its conversation: its worker was given up on, or a newer message took over."""


def record_event(
    conversation: Conversation | int,
    event: LoopEvent,
    *,
    parent_sequence: int | None = None,
    turn_sequence: int | None = None,
    status: str | None = None,
    run_token: str = "",
) -> Event:
    """Save one event with the next sequence number, then broadcast it once the row is committed.

    The sequence comes from an increment of `Conversation.next_sequence` made *before* reading it
    (one UPDATE … RETURNING), inside the transaction: the UPDATE takes PostgreSQL's row lock (held to
    commit) and SQLite's write lock (a read-then-upgrade would fail with "database is locked" instead of waiting), so concurrent
    writers queue up and each reads its own number. The unique (conversation, sequence) constraint
    backs this up. `status`, when given, is written in the same UPDATE so the event and the status the
    page shows agree. `run_token`, when given, must still own the conversation (lease.py), or nothing
    is written and RunReleased is raised: a worker given up on cannot write into a newer run.
    """
    if not event.type or event.type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event.type!r}")
    conversation_id = conversation if isinstance(conversation, int) else conversation.pk
    with transaction.atomic():
        taken = _take_sequence(conversation_id, status, run_token)
        if taken is None:
            if run_token and Conversation.objects.filter(pk=conversation_id).exists():
                raise RunReleased(f"conversation {conversation_id} is no longer owned by run {run_token}")
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        # The status read under the row lock is the one this event was saved with: the frame shows it.
        next_sequence, current_status = taken
        sequence = next_sequence - 1
        row = Event.objects.create(
            conversation_id=conversation_id,
            sequence=sequence,
            type=event.type,
            payload=bounded_payload(event.to_payload()),
            parent_sequence=parent_sequence,
            turn_sequence=turn_sequence,
        )
        transaction.on_commit(lambda: broadcast_event(conversation_id, sequence, event=row, status=current_status))
        if event.type in INBOX_TYPES:
            transaction.on_commit(tell_prompt_inbox)  # the prompt inbox and the navigation bar's count
    if status is not None and not isinstance(conversation, int):
        conversation.status = status
    return row


def _take_sequence(conversation_id: int, status: str | None, run_token: str) -> tuple[int, str] | None:
    """Increment the conversation's next sequence (and set `status`) under its row lock; the new
    next sequence and the status, or None when no row matched (gone, or `run_token` no longer owns it)."""
    found = increment(Conversation, conversation_id, "next_sequence",
                      assign={"status": status} if status is not None else None,
                      where={"run_token": run_token} if run_token else None, returning=("status",))
    return None if found is None else (int(found[0]), str(found[1]))


def lock_conversation(conversation_id: int) -> Conversation:
    """Lock the conversation row for the rest of the transaction, then read it.

    A no-op UPDATE rather than `select_for_update`: it locks the row on PostgreSQL just the same and,
    on SQLite, takes the write lock up front (waiting for it) instead of failing on a lock upgrade.
    """
    Conversation.objects.filter(pk=conversation_id).update(next_sequence=F("next_sequence"))
    return Conversation.objects.get(pk=conversation_id)
