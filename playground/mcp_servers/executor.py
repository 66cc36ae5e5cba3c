"""The playground's tool executor: MCP tools through their server, built-ins in-process, the rest simulated.

    from playground.mcp_servers.executor import PlaygroundExecutor
    outcome = PlaygroundExecutor().execute(tool, {"a": 1, "b": 2}, timeout=30)

- An MCP tool (`mcp__<server>__<tool>`) whose server is registered goes through the process's
  session pool (`session_pool.py`): one open session per server and worker process, reconnected
  when the server went away, discarded after a timeout or crash.
- A built-in tool (`builtin_tools.BUILTIN_TOOLS`) runs in a helper process with a time and memory
  limit (`builtin_sandbox.py`), so no argument can stall the web server or worker that called it.
- Anything else — a catalog-only tool imported without a backend, or an MCP tool whose server is
  not registered — gets a result clearly marked as simulated (`ToolOutcome.simulated`).

Never raises for a tool-level failure: timeouts, unreachable servers and bad arguments come back
as `is_error=True` outcomes with a message the model (and the user) can read.
"""
from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

from playground.engine.execution import CancelSignal, CallCancelled, ToolExecutor, ToolOutcome
from playground.engine.history import text_block
from playground.engine.tools import Tool, server_of
from playground.incidents import report_unexpected
from playground.mcp_servers import trace_context
from playground.mcp_servers.builtin_sandbox import SandboxError, builtin_sandbox
from playground.mcp_servers.builtin_tools import BUILTIN_TOOLS
from playground.mcp_servers.connection import McpCallResult, McpCallTimeout, McpConnectionError
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.services import note_call_outcome
from playground.mcp_servers.session_pool import SessionPool, session_pool
from playground.mcp_servers.transports import ServerConfig

logger = logging.getLogger(__name__)

SIMULATED_PREFIX = "[SIMULATED RESULT]"
# What the Messages API takes as an image block (its base64 source's media types and size limit);
# anything else reaches the model as a note saying what was left out and why.
API_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_API_IMAGE_BYTES = 5 * 1024 * 1024


def error_outcome(message: str) -> ToolOutcome:
    return ToolOutcome(content=[text_block(message)], is_error=True)


def simulated_outcome(tool: Tool, arguments: dict[str, Any], reason: str) -> ToolOutcome:
    """A catalog-only tool's answer: says plainly that nothing was executed."""
    text = (
        f"{SIMULATED_PREFIX} {tool.name} was not executed: {reason} "
        f"This playground returns a simulated result. Arguments received: {json.dumps(arguments, sort_keys=True)}"
    )
    return ToolOutcome(content=[text_block(text)], simulated=True, structured={"simulated": True, "arguments": arguments})


def outcome_from_mcp(result: McpCallResult) -> ToolOutcome:
    """MCP content → Messages API tool_result blocks: text kept, images the API takes forwarded as
    image blocks (the model sees them), other media as notes."""
    blocks: list[dict[str, Any]] = []
    for item in result.content:
        kind = item.get("type")
        if kind == "text":
            blocks.append(text_block(item.get("text", "")))
        elif kind == "image":
            blocks.append(image_block(item.get("data", ""), item.get("mimeType", "")))
        elif kind == "audio":
            size = _decoded_size(item.get("data", ""))
            blocks.append(text_block(f"[audio returned by the tool: {item.get('mimeType', 'unknown type')}, {size} bytes; "
                                     "not forwarded: the Messages API takes no audio]"))
        elif kind == "resource_link":
            blocks.append(text_block(f"[resource link: {item.get('name', '')} {item.get('uri', '')}]".replace("  ", " ")))
        elif kind == "resource":
            resource = item.get("resource") or {}
            if "text" in resource:
                blocks.append(text_block(resource["text"]))
            else:
                blocks.append(text_block(f"[embedded resource {resource.get('uri', '')} ({resource.get('mimeType', 'binary')}); not forwarded]"))
        else:
            blocks.append(text_block(f"[{kind or 'unknown'} content; not forwarded]"))
    structured = result.structured if isinstance(result.structured, dict) else (
        {"result": result.structured} if result.structured is not None else None
    )
    if not blocks and structured is not None:
        blocks.append(text_block(json.dumps(structured, ensure_ascii=False)))
    if not blocks:
        blocks.append(text_block("(the tool returned no content)"))
    mcp_result: dict[str, Any] = {"content": result.content, "isError": result.is_error}
    if result.structured is not None:
        mcp_result["structuredContent"] = result.structured
    return ToolOutcome(content=blocks, is_error=result.is_error, structured=structured, mcp_result=mcp_result)


def image_block(data: str, mime_type: str) -> dict[str, Any]:
    """An MCP image as a Messages API image block, or a note when the API would refuse it."""
    size = _decoded_size(data)
    media_type = (mime_type or "").lower()
    if media_type == "image/jpg":
        media_type = "image/jpeg"  # a common misspelling; the bytes are the same
    if media_type not in API_IMAGE_TYPES:
        why = f"the Messages API takes only {', '.join(API_IMAGE_TYPES)}"
    elif size > MAX_API_IMAGE_BYTES:
        why = f"over the Messages API's {MAX_API_IMAGE_BYTES // (1024 * 1024)} MB limit per image"
    elif not _is_base64(data):
        why = "its data is not valid base64"
    else:
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return text_block(f"[image returned by the tool: {mime_type or 'unknown type'}, {size} bytes; not forwarded: {why}]")


def _is_base64(data: str) -> bool:
    try:
        return bool(data) and bool(base64.b64decode(data, validate=True))
    except (ValueError, TypeError):
        return False


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        return len(data)


class PlaygroundExecutor(ToolExecutor):
    """Dispatch a call by where the tool lives (see the module docstring)."""

    def __init__(self, *, pool: SessionPool | None = None) -> None:
        self._pool = pool

    @property
    def pool(self) -> SessionPool:
        return self._pool or session_pool()

    def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float = 30.0,
                cancel: CancelSignal | None = None) -> ToolOutcome:
        started = time.perf_counter()
        if not isinstance(arguments, dict):
            outcome = error_outcome(f"arguments for {tool.name} must be a JSON object, got {type(arguments).__name__}")
        else:
            try:
                outcome = self._dispatch(tool, arguments, timeout, cancel)
            except CallCancelled:
                raise  # not a failure of the tool: the loop records the cancel
            except Exception as exc:  # noqa: BLE001 - logged with a reference; never the text (a database error quotes its SQL)
                outcome = error_outcome(report_unexpected(f"the call of {tool.name}", exc, log=logger))
        outcome.duration_ms = (time.perf_counter() - started) * 1000
        return outcome

    def _dispatch(self, tool: Tool, arguments: dict[str, Any], timeout: float, cancel: CancelSignal | None) -> ToolOutcome:
        server_name = tool.server or server_of(tool.name)
        if tool.is_mcp or server_name:
            return self._execute_mcp(tool, server_name or "", arguments, timeout, cancel)
        if tool.name in BUILTIN_TOOLS:
            # In a helper process with a time and memory limit: never in this (web or worker) process.
            try:
                answer = builtin_sandbox().call(tool.name, arguments)
            except SandboxError as exc:
                return error_outcome(str(exc))
            if "error" in answer:
                return error_outcome(answer["error"])
            return ToolOutcome(content=[text_block(answer["text"])], structured=answer["structured"])
        return simulated_outcome(tool, arguments, "this playground has no implementation of it (a definition the model "
                                                  "sees, without a backend: a catalog-only tool, or a built-in of Claude Code's "
                                                  "such as Read or Write, labelled \"Built-in · simulated\").")

    def _execute_mcp(self, tool: Tool, server_name: str, arguments: dict[str, Any], timeout: float,
                     cancel: CancelSignal | None) -> ToolOutcome:
        server = McpServer.objects.filter(name=server_name).first()
        if server is None:
            return simulated_outcome(tool, arguments, f"no MCP server named {server_name!r} is registered (catalog-only tool).")
        return call_registered_tool(server, tool.name, arguments, timeout=timeout, pool=self.pool, cancel=cancel)[0]


def call_registered_tool(
    server: Any, registry_name: str, arguments: dict[str, Any], *, timeout: float = 30.0, pool: SessionPool | None = None,
    cancel: CancelSignal | None = None,
) -> tuple[ToolOutcome, McpCallResult | None]:
    """Call one of a registered server's tools by its registry name through the session pool.

    Returns the outcome (never raises for server trouble) and the raw MCP result when there was one
    (the tool-call page shows images and structured content from it). Raises CallCancelled when
    `cancel` stopped the call (the server got `notifications/cancelled`).
    """
    started = time.perf_counter()
    raw: McpCallResult | None = None
    if not server.enabled:
        outcome = error_outcome(f"MCP server {server.name!r} is disabled; {registry_name} cannot be called.")
    else:
        original = (server.tool_names.get(registry_name) or {}).get("original") or registry_name.removeprefix(server.tool_prefix)
        try:
            raw = (pool or session_pool()).call_tool(server.pk, ServerConfig.from_server(server), original, arguments,
                                                     timeout=timeout, cancel=cancel, meta=trace_context.request_meta())
            outcome = outcome_from_mcp(raw)
            note_call_outcome(server, None)
        except McpCallTimeout:
            outcome = error_outcome(
                f"{registry_name} timed out after {timeout:g} s (MCP server {server.name!r} did not answer in time)."
            )
        except McpConnectionError as exc:
            outcome = error_outcome(f"MCP server {server.name!r} is unavailable: {exc}")
            note_call_outcome(server, exc)
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    return outcome, raw
