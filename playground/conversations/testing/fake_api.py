"""A local HTTP server that speaks the Anthropic Messages API, for driving the real SDK in tests.

It is a real server (threaded, port 0) that `anthropic.Anthropic(base_url=server.url)` talks to over
HTTP. Each test scripts it with a queue of replies and reads back the requests it received. Before
taking a scripted reply it validates the request the way the real API does and answers
`400 invalid_request_error` with the real error shape for what the real API rejects — so a
regression in request building shows up in a test exactly as it would in production:

- every tool deferred ("At least one tool must have defer_loading=false. All tools cannot be deferred.");
- a `tool_reference` to a tool that is not in `tools` ("Tool reference 'x' not found in available tools");
- a `tool_result` whose content mixes `tool_reference` blocks with other blocks;
- `defer_loading` / `tool_reference` at all when built with `supports_defer_loading=False` (a gateway:
  "tools.0.custom.defer_loading: Extra inputs are not permitted");
- `tool_use` without a matching `tool_result` right after it, or a `tool_result` for an unknown id;
- a `tool_result` for a server tool (`srvtoolu_…`) id;
- tool_use / tool_result blocks in a request that defines no tools.

- more than 4 blocks with `cache_control`;
- a `role: "system"` message without the `mid-conversation-tool-changes-2026-07-01` beta; in one, a
  block other than text / `tool_addition` / `tool_removal`, a `tool_definition` addition without the
  `inline-tools-2026-09-15` beta, a removal by definition, a reference to a tool not declared in `tools`
  (nor defined earlier), an MCP reference to a server the request does not name, and a removal of a
  tool not offered at that point (`400` with `error_code: tool_reference_unresolved`, as the SDK's
  `ToolReferenceUnresolvedError` reads it).

A request with `"stream": true` gets the reply as server-sent events, the way the real API streams:
`message_start`, per block `content_block_start` / `content_block_delta` (`text_delta` a few words at
a time, `input_json_delta` for tool input) / `content_block_stop`, a `ping`, `message_delta` with the
stop reason and usage, `message_stop`; `stream_delay` seconds between events (0 by default).

Scripted replies may also be HTTP errors (429, 529, 500…) to exercise the SDK's retries.

Built with `prompt_cache=True` it reports each reply's `input_tokens` / `cache_creation_input_tokens`
/ `cache_read_input_tokens` from the engine's cache model (`prompt_cache.AnthropicCacheModel`, one
per server, requests timed by `clock`) instead of the scripted figures: the same rules the pages use.
"""
from __future__ import annotations

import base64
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from playground.conversations.testing.local_double import EventStream, LocalAPIDouble, RawBody
from playground.engine.history import blocks_of, text_block
from playground.engine.prompt_cache import MAX_BREAKPOINTS, AnthropicCacheModel

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SERVER_SEARCH_TOOL_TYPES = ("tool_search_tool_bm25_20251119", "tool_search_tool_regex_20251119")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


class InvalidRequest(Exception):
    """What the real API answers with 400 invalid_request_error (`error_code`: the details' code, if any)."""

    def __init__(self, message: str, error_code: str = "") -> None:
        super().__init__(message)
        self.error_code = error_code


TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
SYSTEM_MESSAGE_BLOCKS = ("text", "tool_addition", "tool_removal")
UNRESOLVED = "tool_reference_unresolved"


def _check_tool_change(block: dict[str, Any], where: str, state: dict[str, Any], betas: set[str]) -> None:
    """One tool_addition / tool_removal block, folded into `state` (declared, offered, mcp servers)."""
    kind, tool = block["type"], block.get("tool")
    if not isinstance(tool, dict):
        raise InvalidRequest(f"{where}.{kind}.tool: Field required")
    ref_type = tool.get("type")
    allowed = ["tool_reference", "mcp_tool_reference", "mcp_toolset_reference"]
    if kind == "tool_addition":
        allowed.append("tool_definition")
    if ref_type not in allowed:
        raise InvalidRequest(f"{where}.{kind}.tool: Input tag '{ref_type}' found using 'type' does not match any of the "
                             f"expected tags: {', '.join(repr(a) for a in allowed)}")
    if ref_type == "tool_definition":
        if INLINE_TOOLS_BETA not in betas:
            raise InvalidRequest(f"{where}.tool_addition.tool: a tool_definition needs the {INLINE_TOOLS_BETA} beta")
        definition = tool.get("definition") if isinstance(tool.get("definition"), dict) else {}
        name = definition.get("name", "")
        if not TOOL_NAME.fullmatch(name) or (definition.get("input_schema") or {}).get("type") != "object":
            raise InvalidRequest(f"{where}.tool_addition.tool.definition: an invalid tool definition")
        state["declared"].add(name)
        state["offered"].add(name)
        return
    if ref_type in ("mcp_tool_reference", "mcp_toolset_reference"):
        server = tool.get("server_name")
        if server not in state["mcp_servers"]:
            raise InvalidRequest(f"{where}: MCP server '{server}' is not defined in mcp_servers", UNRESOLVED)
        return
    name = tool.get("name")
    if not isinstance(name, str):
        raise InvalidRequest(f"{where}.{kind}.tool.tool_reference.name: Field required")
    if name not in state["declared"]:
        raise InvalidRequest(f"{where}: Tool reference '{name}' does not resolve to a tool defined at this position", UNRESOLVED)
    if kind == "tool_removal":
        if name not in state["offered"]:
            raise InvalidRequest(f"{where}: tool_removal of '{name}', which is not offered at this position", UNRESOLVED)
        state["offered"].discard(name)
    else:
        state["offered"].add(name)


def _check_system_message(message: dict[str, Any], m_index: int, state: dict[str, Any], betas: set[str]) -> None:
    if TOOL_CHANGES_BETA not in betas:
        raise InvalidRequest(f"messages.{m_index}.role: Input should be 'user' or 'assistant'")
    if message.get("clear_at") not in (None, "never", "next_user_message"):
        raise InvalidRequest(f"messages.{m_index}.clear_at: Input should be 'next_user_message' or 'never'")
    content = message.get("content")
    if not content:
        raise InvalidRequest(f"messages.{m_index}: a system message needs content")
    for b_index, block in enumerate(content if isinstance(content, list) else []):
        where = f"messages.{m_index}.content.{b_index}"
        if not isinstance(block, dict) or block.get("type") not in SYSTEM_MESSAGE_BLOCKS:
            kind = block.get("type") if isinstance(block, dict) else block
            raise InvalidRequest(f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected "
                                 "tags: 'text', 'tool_addition', 'tool_removal'")
        if block["type"] != "text":
            _check_tool_change(block, where, state, betas)


@dataclass
class ErrorReply:
    status: int
    message: str = "scripted error"
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": self.error_type or ERROR_TYPES.get(self.status, "api_error"), "message": self.message},
        }


Reply = dict[str, Any] | ErrorReply | Callable[[dict[str, Any]], "dict[str, Any] | ErrorReply"]


@dataclass
class StreamedError:
    """A streamed reply that starts and then fails with an `error` event (what the Messages API sends
    when it is overloaded mid-stream); a request that does not stream gets it as a 500."""

    message: str
    error_type: str = "overloaded_error"

    def events(self, model: str = "claude-test") -> list[tuple[str, dict[str, Any]]]:
        start = message_reply([], model=model)
        start.update(stop_reason=None, stop_sequence=None)
        return [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"}),
                ("error", {"type": "error", "error": {"type": self.error_type, "message": self.message}})]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 0
    error: str = ""


_ids = itertools.count(1)


def message_reply(content: list[dict[str, Any]], *, stop_reason: str = "end_turn", model: str = "claude-test",
                  input_tokens: int = 100, output_tokens: int = 20, cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }


def text_reply(text: str, **kwargs: Any) -> dict[str, Any]:
    return message_reply([text_block(text)], stop_reason="end_turn", **kwargs)


def tool_use_reply(name: str, arguments: dict[str, Any], *, text: str = "", tool_use_id: str = "", **kwargs: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = [text_block(text)] if text else []
    content.append({"type": "tool_use", "id": tool_use_id or f"toolu_fake_{next(_ids):04d}", "name": name, "input": arguments})
    return message_reply(content, stop_reason="tool_use", **kwargs)


def server_search_reply(query: str, found: list[str], *, then: list[dict[str, Any]] | None = None,
                        tool_name: str = "tool_search_tool_bm25", **kwargs: Any) -> dict[str, Any]:
    """Anthropic's server-side search: server_tool_use + tool_search_tool_result, then `then` blocks."""
    server_id = f"srvtoolu_fake_{next(_ids):04d}"
    content = [
        {"type": "server_tool_use", "id": server_id, "name": tool_name, "input": {"query": query}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": server_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found],
            },
        },
        *(then or []),
    ]
    stop = "tool_use" if any(b.get("type") == "tool_use" for b in then or []) else "end_turn"
    return message_reply(content, stop_reason=stop, **kwargs)


WORDS_PER_TEXT_DELTA = 3


def stream_events(reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A message reply as the Messages API streams it (server-sent events, in order)."""
    usage = dict(reply.get("usage") or {})
    start = {**reply, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
    for index, block in enumerate(reply.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            words = re.findall(r"\S+\s*|\s+", block.get("text", ""))
            for at in range(0, len(words), WORDS_PER_TEXT_DELTA):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": "".join(words[at:at + WORDS_PER_TEXT_DELTA])}}))
        elif kind in ("tool_use", "server_tool_use"):
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {**block, "input": {}}}))
            encoded = json.dumps(block.get("input") or {})
            for at in range(0, len(encoded), 16):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta", "partial_json": encoded[at:at + 16]}}))
        else:  # a server tool's result and other whole blocks arrive in their start event
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": reply.get("stop_reason"), "stop_sequence": None},
                                     "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _count_breakpoints(value: Any) -> int:
    if isinstance(value, list):
        return sum(_count_breakpoints(item) for item in value)
    if isinstance(value, dict):
        return int(bool(value.get("cache_control"))) + sum(_count_breakpoints(item) for item in value.values()
                                                           if isinstance(item, (list, dict)))
    return 0


def validate_messages_request(body: dict[str, Any], *, supports_defer_loading: bool = True,
                              betas: frozenset[str] = frozenset()) -> None:
    """Raise InvalidRequest with the real API's message for what it would reject (`betas`: the
    request's anthropic-beta header)."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            raise InvalidRequest(f"{key}: Field required")
    marked = _count_breakpoints([body.get("tools"), body.get("system"), body.get("messages")])
    if marked > MAX_BREAKPOINTS:
        raise InvalidRequest(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marked}.")
    tools = body.get("tools") or []
    names: set[str] = set()
    custom_deferred: list[bool] = []
    server_tools = False
    for index, tool in enumerate(tools):
        tool_type = tool.get("type")
        if tool_type in SERVER_SEARCH_TOOL_TYPES:
            server_tools = True
            names.add(tool.get("name", ""))
            continue
        if tool_type not in (None, "custom"):
            raise InvalidRequest(f"tools.{index}: Input tag '{tool_type}' found using 'type' does not match any of the expected tags")
        name = tool.get("name", "")
        if not TOOL_NAME.fullmatch(name):
            raise InvalidRequest(f"tools.{index}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if name in names:
            raise InvalidRequest("tools: Tool names must be unique.")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise InvalidRequest(f"tools.{index}.custom.input_schema.type: Input should be 'object'")
        if "defer_loading" in tool and not supports_defer_loading:
            raise InvalidRequest(f"tools.{index}.custom.defer_loading: Extra inputs are not permitted")
        custom_deferred.append(bool(tool.get("defer_loading")))
    if custom_deferred and all(custom_deferred) and not server_tools:
        raise InvalidRequest("At least one tool must have defer_loading=false. All tools cannot be deferred.")

    messages = body["messages"]
    if not messages:
        raise InvalidRequest("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise InvalidRequest("messages: first message must use the \"user\" role")
    pending_tool_uses: list[str] = []
    changes: dict[str, Any] = {
        "declared": set(names),
        "offered": {t.get("name") for t in tools if not t.get("defer_loading")},
        "mcp_servers": {s.get("name") for s in body.get("mcp_servers") or [] if isinstance(s, dict)},
    }
    for m_index, message in enumerate(messages):
        role = message.get("role")
        if role == "system" and m_index > 0:
            _check_system_message(message, m_index, changes, set(betas))
            continue
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{m_index}.role: Input should be 'user' or 'assistant'")
        blocks = blocks_of(message)
        if not blocks and not (role == "assistant" and m_index == len(messages) - 1):
            raise InvalidRequest(
                f"messages.{m_index}: all messages must have non-empty content except for the optional final assistant message"
            )
        if role == "user":
            result_ids = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if pending_tool_uses:
                missing = [i for i in pending_tool_uses if i not in result_ids]
                if missing:
                    raise InvalidRequest(
                        f"messages.{m_index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        + ", ".join(missing)
                        + ". Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                    )
            for b_index, block in enumerate(blocks):
                if block.get("type") != "tool_result":
                    continue
                tool_use_id = block.get("tool_use_id", "")
                if tool_use_id.startswith("srvtoolu_"):
                    raise InvalidRequest(
                        f"messages.{m_index}.content.{b_index}: tool_result blocks cannot reference server tool use "
                        f"ids: {tool_use_id}"
                    )
                if tool_use_id not in pending_tool_uses:
                    raise InvalidRequest(
                        f"messages.{m_index}.content.{b_index}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
                        "previous message."
                    )
                inner = block.get("content")
                if isinstance(inner, list):
                    kinds = {c.get("type") for c in inner}
                    if "tool_reference" in kinds:
                        if not supports_defer_loading:
                            raise InvalidRequest(
                                f"messages.{m_index}.content.{b_index}.tool_result.content.0: Input tag 'tool_reference' "
                                "found using 'type' does not match any of the expected tags: 'text', 'image', "
                                "'search_result', 'document'"
                            )
                        if kinds != {"tool_reference"}:
                            raise InvalidRequest(
                                f"messages.{m_index}.content.{b_index}.tool_result.content: tool_reference blocks "
                                "cannot be mixed with other content types in a tool_result"
                            )
                        for ref in inner:
                            if ref.get("tool_name") not in names:
                                raise InvalidRequest(f"Tool reference '{ref.get('tool_name')}' not found in available tools")
                            changes["offered"].add(ref.get("tool_name"))
                    for c_index, inner_block in enumerate(inner):
                        where = f"messages.{m_index}.content.{b_index}.tool_result.content.{c_index}"
                        if inner_block.get("type") not in ("text", "image", "search_result", "document", "tool_reference"):
                            raise InvalidRequest(
                                f"{where}: Input tag '{inner_block.get('type')}' found using 'type' does not match any of "
                                "the expected tags: 'text', 'image', 'search_result', 'document'"
                            )
                        if inner_block.get("type") == "image":
                            validate_image_block(inner_block, where)
            pending_tool_uses = []
        else:
            pending_tool_uses = [b.get("id", "") for b in blocks if b.get("type") == "tool_use"]
        if not tools and any(b.get("type") in ("tool_use", "tool_result") for b in blocks):
            raise InvalidRequest("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    if pending_tool_uses:
        raise InvalidRequest(
            "messages: the final assistant message has `tool_use` blocks without `tool_result` blocks: "
            + ", ".join(pending_tool_uses)
        )


IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def validate_image_block(block: dict[str, Any], where: str) -> None:
    """An image block's base64 source as the real API checks it: media type, decodable data, 5 MB."""
    source = block.get("source") or {}
    if source.get("type") != "base64":
        raise InvalidRequest(f"{where}.image.source: Input tag '{source.get('type')}' found using 'type' does not match "
                             "any of the expected tags: 'base64', 'url', 'file'")
    if source.get("media_type") not in IMAGE_MEDIA_TYPES:
        raise InvalidRequest(f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
                             "'image/gif' or 'image/webp'")
    try:
        size = len(base64.b64decode(source.get("data") or "", validate=True))
    except (ValueError, TypeError):
        raise InvalidRequest(f"{where}.image.source.base64: invalid base64 data") from None
    if size == 0:
        raise InvalidRequest(f"{where}.image.source.base64: image cannot be empty")
    if size > MAX_IMAGE_BYTES:
        raise InvalidRequest(f"{where}.image.source.base64: image exceeds 5 MB maximum: {size} bytes > {MAX_IMAGE_BYTES} bytes")


class FakeMessagesAPI(LocalAPIDouble):
    """The server. Use as a context manager; `url` is the SDK's base_url."""

    thread_name = "fake-messages-api"
    request_id_header = "request-id"

    def __init__(self, *, supports_defer_loading: bool = True, retry_after_ms: int = 5, prompt_cache: bool = False,
                 cache_ttl: str = "5m", clock: Callable[[], float] = time.monotonic, stream_delay: float = 0.0) -> None:
        self.stream_delay = stream_delay
        self.supports_defer_loading = supports_defer_loading
        self.cache_model = AnthropicCacheModel(ttl=cache_ttl) if prompt_cache else None
        self.clock = clock
        self.retry_after_ms = retry_after_ms
        super().__init__()
        self.replies: deque[Reply]
        self.requests: list[RecordedRequest]

    @property
    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/v1/messages")]

    # -- HTTP ----------------------------------------------------------------------------------
    def _answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        record = RecordedRequest(path=path, headers=headers, body=body)
        with self._lock:
            self.requests.append(record)
        if path.endswith("/v1/messages/count_tokens"):
            record.status = 200
            return 200, {"input_tokens": max(1, len(json.dumps(body)) // 4)}, {}
        if not path.endswith("/v1/messages"):
            record.status = 404
            return 404, ErrorReply(404, f"Not found: {path}").body(), {}
        betas = frozenset(b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip())
        try:
            validate_messages_request(body, supports_defer_loading=self.supports_defer_loading, betas=betas)
        except InvalidRequest as exc:
            record.status, record.error = 400, str(exc)
            reply = ErrorReply(400, str(exc)).body()
            if exc.error_code:
                reply["error"]["details"] = {"error_code": exc.error_code}
            return 400, reply, {}
        with self._lock:
            reply: Reply | None = self.replies.popleft() if self.replies else None
        if reply is None:
            # 418 is not retried by the SDK: an unscripted call fails the test at once.
            record.status, record.error = 418, "no scripted reply left"
            return 418, ErrorReply(418, "fake API: no scripted reply left for this request").body(), {}
        if callable(reply):
            reply = reply(body)
        if isinstance(reply, ErrorReply):
            record.status, record.error = reply.status, reply.message
            extra = {"retry-after-ms": str(self.retry_after_ms), **reply.headers}
            return reply.status, reply.body(), extra
        if isinstance(reply, StreamedError):
            if body.get("stream") is not True:
                record.status, record.error = 500, reply.message
                return 500, ErrorReply(500, reply.message, reply.error_type).body(), {}
            record.status, record.error = 200, reply.message
            return 200, EventStream(reply.events()), {}
        if isinstance(reply, RawBody):
            record.status = reply.status
            return reply.status, reply, {}
        record.status = 200
        if self.cache_model is not None:
            with self._lock:
                split = self.cache_model.send(body, self.clock())
            reply = {**reply, "usage": {**reply.get("usage", {}), "input_tokens": split.uncached_tokens,
                                        "cache_creation_input_tokens": split.cache_write_tokens,
                                        "cache_read_input_tokens": split.cache_read_tokens}}
        if body.get("stream") is True:
            return 200, EventStream(stream_events(reply), delay=self.stream_delay), {}
        return 200, reply, {}

    def _invalid_json(self) -> dict[str, Any]:
        return ErrorReply(400, "There was an issue with your request body: invalid JSON").body()

    def _request_id(self) -> str:
        return f"req_fake_{next(_ids):04d}"
