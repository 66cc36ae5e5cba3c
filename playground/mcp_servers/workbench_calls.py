"""A tool call from the workbench that a person may have to take part in.

The call runs on the process's event loop through the workbench's session pool. The view waits for
it as before — unless the server asks a person something first (sampling, `server_requests`): then
the view returns at once ("waiting for your answer") and holds nothing, the call goes on as a
coroutine on the loop, and when it ends its result and history row reach the open pages over the
server's socket (admins' group), rendered by the same template the view uses.
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from django.db import close_old_connections, connections
from django.template.loader import render_to_string

from playground.mcp_servers import server_log, server_requests
from playground.mcp_servers.connection import McpCallResult, McpCallTimeout, McpConnectionError
from mcp.shared.exceptions import MCPError

from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.executor import error_outcome, outcome_from_mcp
from playground.mcp_servers.models import McpCallRecord, McpServer
from playground.mcp_servers.services import note_call_outcome
from playground.mcp_servers.session_pool import SessionPool
from playground.mcp_servers.transports import ServerConfig
from playground.per_process import portal
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

# Beyond the call's own timeout (and a session's connect), how long the view waits before it stops.
WAIT_MARGIN_SECONDS = 30.0


@dataclass
class WorkbenchToolCall:
    server: McpServer
    tool: Any  # the registry's Tool row
    arguments: dict[str, Any]
    timeout: float
    user: Any
    started: float = field(default_factory=time.perf_counter)
    future: concurrent.futures.Future | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: bool = False
    detached: bool = False  # the view returned before the call ended: the loop side reports its end


def start(server: McpServer, tool: Any, arguments: dict[str, Any], *, timeout: float, user: Any, pool: SessionPool) -> WorkbenchToolCall:
    call = WorkbenchToolCall(server=server, tool=tool, arguments=arguments, timeout=timeout, user=user)
    original = (server.tool_names.get(tool.name) or {}).get("original") or tool.name.removeprefix(server.tool_prefix)
    config = ServerConfig.from_server(server)

    async def run() -> tuple[McpCallResult | None, BaseException | None]:
        raw: McpCallResult | None = None
        error: BaseException | None = None
        try:
            raw = await pool.acall_tool(server.pk, config, original, arguments, timeout=timeout)
        except McpConnectionError as exc:
            error = exc
        except MCPError as exc:  # the server answered tools/call with a protocol error
            error = exc
        with call.lock:
            call.finished = True
            detached = call.detached
        if detached:
            await anyio.to_thread.run_sync(_report_detached, call, raw, error)
        return raw, error

    call.future = portal().submit(run())
    return call


def wait(call: WorkbenchToolCall) -> dict[str, Any] | None:
    """The result's template context when the call ended, or None when the server asked a person
    something first (or the call outlived the wait): its result will be pushed to the page."""
    attention = server_requests.watch(call.server.pk)
    try:
        concurrent.futures.wait([call.future, attention], timeout=call.timeout + WAIT_MARGIN_SECONDS,
                                return_when=concurrent.futures.FIRST_COMPLETED)
    finally:
        server_requests.unwatch(call.server.pk, attention)
    with call.lock:
        if not call.finished:
            call.detached = True
            return None
    raw, error = call.future.result(timeout=WAIT_MARGIN_SECONDS)  # finished: its coroutine is returning
    return finish(call, raw, error)


def finish(call: WorkbenchToolCall, raw: McpCallResult | None, error: BaseException | None) -> dict[str, Any]:
    """Keep the call in the history and the server's status true; the result template's context."""
    server, tool = call.server, call.tool
    if error is None and raw is not None:
        outcome = outcome_from_mcp(raw)
        note_call_outcome(server, None)
    elif isinstance(error, MCPError):
        outcome = error_outcome(scrub_for(server, f"the server answered with error {error.code}: {error}"))
    elif isinstance(error, McpCallTimeout):
        outcome = error_outcome(f"{tool.name} timed out after {call.timeout:g} s (MCP server {server.name!r} did not answer in time).")
    else:
        outcome = error_outcome(f"MCP server {server.name!r} is unavailable: {error}")
        note_call_outcome(server, error)
    outcome.duration_ms = (time.perf_counter() - call.started) * 1000
    server_log.record_call(
        server, kind=McpCallRecord.Kind.TOOL, name=tool.name, arguments=call.arguments, ok=not outcome.is_error,
        result=outcome.content if outcome.structured is None else {"content": outcome.content, "structured": outcome.structured},
        duration_ms=outcome.duration_ms, user=call.user,
    )
    return {
        "server": server, "tool": tool, "outcome": outcome, "raw": raw,
        "arguments_json": json.dumps(call.arguments, indent=2, ensure_ascii=False),
        "structured_json": json.dumps(outcome.structured, indent=2, ensure_ascii=False) if outcome.structured is not None else "",
        "images": [c for c in (raw.content if raw else []) if c.get("type") == "image"],
        "history": server_log.history(server),
    }


def _report_detached(call: WorkbenchToolCall, raw: McpCallResult | None, error: BaseException | None) -> None:
    """In a worker thread of the loop: record the call and push its result and history to the pages."""
    close_old_connections()
    try:
        call.server.refresh_from_db()
        context = finish(call, raw, error)
        html = render_to_string("mcp_servers/_tool_call_pushed.html", context)
        send_to_group(server_log.log_group(call.server.pk), {"type": server_log.LOG_MESSAGE_TYPE, "html": html})
    except Exception:
        logger.exception("could not report the end of a workbench call to %s", call.tool.name)
    finally:
        connections.close_all()
