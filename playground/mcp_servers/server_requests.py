"""Requests a server sends the workbench's session mid-call, answered by a person on the page:
`sampling/createMessage` (by hand, or by a profile's model on the person's word) and
`elicitation/create` (a form built from the server's schema: accept, decline or cancel). `roots/list` is
answered at once from the server's configured roots (`McpServer.roots`).

How it waits without holding anything. The workbench's pooled session runs on the process's event
loop (`per_process.portal()`). When the server asks, the session's callback (`handlers_for`) saves an
`McpServerRequest` row, pushes its card to the server's open pages (the admins' log group), and
awaits a message on the channel layer group `answer_group(id)` — a coroutine on the loop, no
thread and no worker. Whoever answers (the page's POST in any web process, or a Celery task
that asked a model) saves the answer on the row first and then sends to that group
(`answer`); the callback reads the row and hands the server its result. A request nobody answers
in `MCP_SERVER_REQUEST_WAIT_SECONDS`, or whose call ended meanwhile (a timeout, a crash), is
marked expired and the server gets an error.

A view that started a tool call and waits for it is told at once when the server asks a person
something (`watch`): it then returns, and the call's result reaches the page over the socket later.
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

import anyio
from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.template.loader import render_to_string
from django.utils import timezone
from mcp import types

from playground.mcp_servers.connection import ASKED_DURING, ClientHandlers
from playground.mcp_servers.forms import ElicitationForm
from playground.mcp_servers.models import McpServer, McpServerRequest
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.server_log import LOG_MESSAGE_TYPE, log_group
from playground.mcp_servers.server_log import record as record_log
from playground.registry.models import AgentProfile
from playground.realtime import listening_to_group, send_to_group

logger = logging.getLogger(__name__)

ANSWERED_MESSAGE_TYPE = "mcp.answered"
# What the server is told when nobody answered (MCP leaves the code to the client; -1 is the SDK's
# own "user rejected" in its examples).
DECLINED_CODE = -1
SHOWN_ANSWERED = 5  # answered requests kept on the page under the pending ones

_watch_lock = threading.Lock()
_watchers: dict[int, set[concurrent.futures.Future]] = {}
_waiting: dict[int, int] = {}  # server id → requests of this process's sessions waiting on a person


def answer_group(request_id: int) -> str:
    return f"mcp-answer-{request_id}"


def wait_seconds() -> float:
    return float(settings.MCP_SERVER_REQUEST_WAIT_SECONDS)


# -- views waiting on a call of this process ----------------------------------------------------------
def watch(server_id: int) -> concurrent.futures.Future:
    """A future that gets the request's id when a session of this process asks a person something
    for this server; `unwatch` it when done."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    with _watch_lock:
        _watchers.setdefault(server_id, set()).add(future)
    return future


def unwatch(server_id: int, future: concurrent.futures.Future) -> None:
    with _watch_lock:
        _watchers.get(server_id, set()).discard(future)


def waiting_on_person(server_id: int) -> bool:
    """Whether a session of this process is waiting for a person's answer for this server (its one
    request at a time is then held: another operation would wait as long)."""
    with _watch_lock:
        return _waiting.get(server_id, 0) > 0


def _tell_watchers(server_id: int, request_id: int) -> None:
    with _watch_lock:
        watchers = _watchers.pop(server_id, set())
        _waiting[server_id] = _waiting.get(server_id, 0) + 1
    for future in watchers:
        if not future.done():
            future.set_result(request_id)


def _done_waiting(server_id: int) -> None:
    with _watch_lock:
        _waiting[server_id] = max(0, _waiting.get(server_id, 0) - 1)


# -- the session's side: ask and wait -----------------------------------------------------------------
def handlers_for(server_id: int, secrets_of: Any) -> ClientHandlers:
    """The workbench session's answers to what the server asks (a registered server's pooled session)."""

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        row = await ask_person(server_id, secrets_of, McpServerRequest.Kind.SAMPLING,
                               params.model_dump(by_alias=True, mode="json", exclude_none=True))
        if row.status == McpServerRequest.Status.ANSWERED:
            return types.CreateMessageResult.model_validate(row.answer)
        return types.ErrorData(code=DECLINED_CODE, message=_refusal(row))

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        row = await ask_person(server_id, secrets_of, McpServerRequest.Kind.ELICITATION,
                               params.model_dump(by_alias=True, mode="json", exclude_none=True))
        if row.status in (McpServerRequest.Status.ANSWERED, McpServerRequest.Status.DECLINED, McpServerRequest.Status.CANCELLED):
            return types.ElicitResult.model_validate(row.answer)
        return types.ElicitResult(action="cancel")  # nobody answered: for the server, the person went away

    async def list_roots(context: Any) -> types.ListRootsResult:
        roots = await _in_thread(_roots_listed, server_id, secrets_of)
        return types.ListRootsResult(roots=[types.Root(uri=root["uri"], name=root.get("name") or None) for root in roots])

    async def notifications(message: Any) -> None:
        line = notification_line(message)
        if line:
            await _in_thread(record_log, server_id, [("notification", line)], secrets_of)

    async def progress(done: float, total: float | None, message: str | None) -> None:
        line = f"notifications/progress {done:g}" + (f"/{total:g}" if total is not None else "") + (f": {message}" if message else "")
        await _in_thread(record_log, server_id, [("notification", line)], secrets_of)

    return ClientHandlers(sampling=sampling, elicitation=elicitation, list_roots=list_roots, notifications=notifications,
                          progress=progress)


# Shown otherwise: log messages go to the log as themselves, a call's progress through its progress
# callback (the SDK hands it to both); cancellations are the SDK's own.
UNSHOWN_NOTIFICATIONS = {"notifications/message", "notifications/cancelled", "notifications/progress"}


def notification_line(message: Any) -> str:
    """A server notification as one log line: its method and what it says (a resource's URI);
    "" for what is shown otherwise or not a notification (a transport error)."""
    method = str(getattr(message, "method", "") or "")
    if not method or method in UNSHOWN_NOTIFICATIONS:
        return ""
    params = getattr(message, "params", None)
    details = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
    details.pop("_meta", None)
    if method == "notifications/resources/updated":
        return f"{method} {details.get('uri', '')}"
    return f"{method} {json.dumps(details, ensure_ascii=False)}" if details else method


def _roots_listed(server_id: int, secrets_of: Any) -> list[dict[str, str]]:
    """The server's configured roots, and a line in its log saying it asked (what it was told)."""
    roots = list(McpServer.objects.filter(pk=server_id).values_list("roots", flat=True).first() or [])
    record_log(server_id, [("session", f"the server listed the client's roots (roots/list): {len(roots)} root(s)")], secrets_of)
    return roots


def _refusal(row: McpServerRequest) -> str:
    if row.status == McpServerRequest.Status.DECLINED:
        return "The person at the playground's workbench declined the request."
    return row.note or "Nobody answered the request in time."


async def ask_person(server_id: int, secrets_of: Any, kind: str, params: dict[str, Any]) -> McpServerRequest:
    """Save the request, show it, and wait (on the channel layer, no thread) until it is answered,
    declined or expires; the row as it ended. An input request of an InputRequiredResult is filed
    under the request and round that asked it (`connection.ASKED_DURING`)."""
    asked_during = ASKED_DURING.get()
    row = await _in_thread(_create, server_id, secrets_of, kind, params, asked_during.describe() if asked_during else "")
    try:
        async with listening_to_group(answer_group(row.pk)) as receive:
            _tell_watchers(server_id, row.pk)
            try:
                with anyio.move_on_after(wait_seconds()):
                    while True:
                        current = await _in_thread(_reload, row.pk)
                        if current is None or not current.is_pending:
                            return current or row
                        await receive()
            finally:
                _done_waiting(server_id)
    except BaseException:
        # The call ended under it (a timeout dropped the session, the caller went away): say so.
        with anyio.move_on_after(5, shield=True):
            await _in_thread(expire, row.pk, "The call that asked ended before an answer came (it timed out or the server went away).")
        raise
    await _in_thread(expire, row.pk, f"Nobody answered within {wait_seconds():g} s.")
    return await _in_thread(_reload, row.pk) or row


async def _in_thread(function: Any, *args: Any) -> Any:
    def run() -> Any:
        close_old_connections()
        try:
            return function(*args)
        finally:
            connections.close_all()  # a worker thread of the loop: give its connection back

    return await anyio.to_thread.run_sync(run)


def _create(server_id: int, secrets_of: Any, kind: str, params: dict[str, Any], asked_during: str = "") -> McpServerRequest:
    shown = _scrubbed(params, secrets_of)
    row = McpServerRequest.objects.create(server_id=server_id, kind=kind, params=shown,
                                          asked_during=scrub_for(secrets_of, asked_during)[:300])
    push(row, new=True)
    return row


def _scrubbed(value: Any, secrets_of: Any) -> Any:
    if isinstance(value, str):
        return scrub_for(secrets_of, value)
    if isinstance(value, list):
        return [_scrubbed(v, secrets_of) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, secrets_of) for k, v in value.items()}
    return value


def _reload(request_id: int) -> McpServerRequest | None:
    return McpServerRequest.objects.filter(pk=request_id).first()


def expire(request_id: int, note: str) -> bool:
    """Mark a still-pending request expired (nobody answered, or its call ended)."""
    changed = McpServerRequest.objects.filter(pk=request_id, status=McpServerRequest.Status.PENDING).update(
        status=McpServerRequest.Status.EXPIRED, note=note[:500], answered_at=timezone.now())
    if changed:
        push(McpServerRequest.objects.get(pk=request_id))
    return bool(changed)


# -- the answering side (a view, or a task that asked a model) ---------------------------------------
def answer(request_id: int, *, status: str, result: dict[str, Any], user: Any = None, with_label: str = "") -> bool:
    """Settle a pending request: saved first, then the waiting session is woken (after commit) and
    open pages get the card. False when it was no longer pending (answered elsewhere, expired)."""
    with transaction.atomic():
        row = McpServerRequest.objects.select_for_update().filter(pk=request_id).first()
        if row is None or not row.is_pending:
            return False
        row.status = status
        row.answer = result
        row.answered_by = user if getattr(user, "is_authenticated", False) else None
        row.answered_with = with_label[:200]
        row.answered_at = timezone.now()
        row.note = ""  # "asking the model…" is over
        row.save(update_fields=["status", "answer", "answered_by", "answered_with", "answered_at", "note"])

        def wake() -> None:
            try:
                send_to_group(answer_group(request_id), {"type": ANSWERED_MESSAGE_TYPE})
            except Exception:
                logger.warning("could not wake the session waiting on MCP server request %s", request_id, exc_info=True)
            push(row)

        transaction.on_commit(wake)
    return True


def sampling_result(text: str, *, model: str) -> dict[str, Any]:
    """A `CreateMessageResult` (MCP JSON) with one text block."""
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": model, "stopReason": "endTurn"}


@dataclass(frozen=True)
class SamplingCompletion:
    """A sampling request as a plain completion in no vendor's shape (what a model provider's
    `complete(system, messages, max_tokens)` takes; each sends it in its own)."""

    system: str
    messages: list[dict[str, Any]]  # [{"role", "content": [{"type": "text", "text"} | {"type": "image", "media_type", "data"}]}]
    max_tokens: int


def sampling_completion(params: dict[str, Any], *, max_tokens_cap: int) -> SamplingCompletion:
    """A sampling request's messages, system prompt and token cap: text blocks kept, images kept,
    anything else named."""
    messages = []
    for message in params.get("messages") or []:
        blocks = message.get("content")
        blocks = blocks if isinstance(blocks, list) else [blocks]
        content = []
        for block in blocks:
            block = block or {}
            if block.get("type") == "text":
                content.append({"type": "text", "text": str(block.get("text") or "")})
            elif block.get("type") == "image":
                content.append({"type": "image", "media_type": block.get("mimeType"), "data": block.get("data")})
            else:
                content.append({"type": "text", "text": f"[{block.get('type', 'unknown')} content left out]"})
        messages.append({"role": message.get("role") if message.get("role") in ("user", "assistant") else "user", "content": content})
    return SamplingCompletion(system=str(params.get("systemPrompt") or ""), messages=messages,
                              max_tokens=max(1, min(int(params.get("maxTokens") or 1), max_tokens_cap)))


# -- what pages show --------------------------------------------------------------------------------
def shown_requests(server_id: int) -> list[McpServerRequest]:
    """Pending requests first, then the last few settled ones (each ready for its card)."""
    pending = list(McpServerRequest.objects.filter(server_id=server_id, status=McpServerRequest.Status.PENDING).order_by("id"))
    settled = list(McpServerRequest.objects.filter(server_id=server_id).exclude(status=McpServerRequest.Status.PENDING)[:SHOWN_ANSWERED])
    return [prepared(row) for row in pending + settled]


def elicitation_form(row: McpServerRequest, data: Any = None) -> ElicitationForm:
    return ElicitationForm(row.params.get("requestedSchema") or {}, data, prefix=f"r{row.pk}")


def prepared(row: McpServerRequest, form: ElicitationForm | None = None) -> McpServerRequest:
    """A request with what its card shows beside the row: a pending elicitation's form, and a URL
    the server asks the person to open only when it is http(s) (never a `javascript:` link)."""
    if row.kind == McpServerRequest.Kind.ELICITATION:
        if row.is_pending and row.params.get("mode") != "url":
            row.form = form or elicitation_form(row)
        url = str(row.params.get("url") or "")
        row.safe_url = url if url.lower().startswith(("https://", "http://")) else ""
        row.answer_json = json.dumps(row.answer.get("content"), indent=2, ensure_ascii=False) if row.answer.get("content") else ""
    return row


def sampling_profiles() -> list[AgentProfile]:
    """The profiles whose model may answer a sampling request."""
    return list(AgentProfile.objects.order_by("name"))


def push(row: McpServerRequest, *, new: bool = False) -> None:
    """Send a request's card to the server's open pages (admins): a new one is added to the pane,
    a settled one replaces its card. Never raises (a reload shows the row)."""
    try:
        html = render_to_string("mcp_servers/_server_request.html", {
            "req": prepared(row), "server_id": row.server_id, "oob": "afterbegin" if new else "outerHTML",
            "sampling_profiles": sampling_profiles()})
        send_to_group(log_group(row.server_id), {"type": LOG_MESSAGE_TYPE, "html": html})
    except Exception:
        logger.warning("could not push MCP server request %s", row.pk, exc_info=True)

