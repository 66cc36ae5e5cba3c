"""A server's live log (stderr lines and `notifications/message` logs) and its workbench call history.

Log lines come from the MCP client (`connection.LogForwarder`) in a worker thread: `record` scrubs
them with the server's secrets, stores them (the newest `KEEP_LINES` per server) and pushes them to
the server's open detail pages over the status socket (group `mcp-log-<id>`, joined by admins only:
the log and history show what the server printed and returned, which only admins can make it do).
`record_call` keeps a workbench call (tool, resource, prompt, ping) in the history, bounded too.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from django.db import connections, transaction
from django.db.models import Q
from django.template.loader import render_to_string

from playground.mcp_servers.models import McpCallRecord, McpLogLine, McpServer
from playground.mcp_servers.secrets import scrub_for
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

KEEP_LINES = 300
KEEP_CALLS = 100
HISTORY_SHOWN = 20  # rows of the call history a page shows
MAX_SUMMARY_CHARS = 4000
LOG_MESSAGE_TYPE = "status.update"  # the status consumer's handler: it sends the HTML as is


def log_group(server_id: int) -> str:
    return f"mcp-log-{server_id}"


def sink_for(server_id: int, secrets_of: Any):
    """A `connection.LogSink` for one server; `secrets_of` (its row or `ServerConfig`) gives the secrets to scrub."""

    def sink(entries: list[tuple[str, str]]) -> None:
        try:
            record(server_id, entries, secrets_of)
        finally:
            # Runs in a worker thread of the MCP client loop: give its database connection back.
            connections.close_all()

    return sink


def record(server_id: int, entries: list[tuple[str, str]], secrets_of: Any) -> list[McpLogLine]:
    """Scrub, store and push a batch of log lines. Storing comes first, so a page that loads later shows them."""
    lines = McpLogLine.objects.bulk_create(
        McpLogLine(server_id=server_id, source=source[:20], text=scrub_for(secrets_of, text)) for source, text in entries
    )
    newest_kept = McpLogLine.objects.filter(server_id=server_id).order_by("-id").values_list("id", flat=True)[KEEP_LINES:KEEP_LINES + 1]
    if newest_kept:
        McpLogLine.objects.filter(server_id=server_id, id__lte=newest_kept[0]).delete()
    try:
        html = render_to_string("mcp_servers/_log_lines.html", {"server_id": server_id, "lines": lines, "oob": True})
        notifications = [line for line in lines if is_notification(line.source)]
        if notifications:  # the notifications pane gets them too
            html += render_to_string("mcp_servers/_notification_lines.html",
                                     {"server_id": server_id, "lines": notifications, "oob": True})
        send_to_group(log_group(server_id), {"type": LOG_MESSAGE_TYPE, "html": html})
    except Exception:
        logger.warning("could not push log lines of MCP server %s", server_id, exc_info=True)
    return lines


def is_notification(source: str) -> bool:
    """What the server notified the client of: log messages and every other notification (not its
    stderr, nor the connection's own events)."""
    return source == "notification" or source.startswith("log:")


def recent_notifications(server_id: int, limit: int = 100) -> list[McpLogLine]:
    lines = McpLogLine.objects.filter(server_id=server_id).filter(Q(source="notification") | Q(source__startswith="log:"))
    return list(reversed(lines.order_by("-id")[:limit]))


def recent_lines(server_id: int, limit: int = 100) -> list[McpLogLine]:
    return list(reversed(McpLogLine.objects.filter(server_id=server_id).order_by("-id")[:limit]))


def forget(server_id: int) -> None:
    McpLogLine.objects.filter(server_id=server_id).delete()


def summarise(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SUMMARY_CHARS else text[:MAX_SUMMARY_CHARS] + f"\n… ({len(text) - MAX_SUMMARY_CHARS} more characters not kept)"


def record_call(
    server: McpServer, *, kind: str, name: str, arguments: Any = None, ok: bool, result: Any, duration_ms: float, user: Any = None
) -> McpCallRecord:
    """Keep one workbench call in the server's history (scrubbed, cut, the newest `KEEP_CALLS`)."""
    arguments_text = scrub_for(server, json.dumps(arguments or {}, ensure_ascii=False, default=str))
    try:
        stored_arguments = json.loads(arguments_text)
    except ValueError:  # a mask landed somewhere that broke the JSON: keep the scrubbed text
        stored_arguments = {"scrubbed": arguments_text}
    call = McpCallRecord.objects.create(
        server=server,
        user=user if getattr(user, "is_authenticated", False) else None,
        kind=kind,
        name=name[:500],
        arguments=stored_arguments,
        ok=ok,
        summary=scrub_for(server, summarise(result)),
        duration_ms=round(duration_ms, 1),
    )
    stale = McpCallRecord.objects.filter(server=server).order_by("-id").values_list("id", flat=True)[KEEP_CALLS:KEEP_CALLS + 1]
    if stale:
        McpCallRecord.objects.filter(server=server, id__lte=stale[0]).delete()
    transaction.on_commit(lambda: push_history(server))
    return call


def history(server: McpServer) -> list[McpCallRecord]:
    return list(server.call_records.select_related("user")[:HISTORY_SHOWN])


def push_history(server: McpServer) -> None:
    """Send the call history to the server's open pages (admins), so every tab shows a new call as it
    is kept — one made elsewhere, or one whose result came after its page stopped waiting. Never raises."""
    try:
        html = render_to_string("mcp_servers/_history.html", {"server": server, "history": history(server), "oob": True})
        send_to_group(log_group(server.pk), {"type": LOG_MESSAGE_TYPE, "html": html})
    except Exception:
        logger.warning("could not push the call history of MCP server %s", server.pk, exc_info=True)
