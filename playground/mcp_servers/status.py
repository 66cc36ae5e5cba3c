"""Live status badges: one function renders and broadcasts a server's status to open pages.

The server list joins the `mcp-status` group (`ws/mcp/status/`) and gets the server's table row
(badge, tool count, last sync); a server's
detail page joins `mcp-status-<id>` (`ws/mcp/status/<id>/`) and also gets the last-sync summary
(last error, sync time, warnings) and, when the tool list changed, a trigger to fetch it again. Messages are HTML whose elements carry `hx-swap-oob`, so the
htmx ws extension replaces them in place — and each page only receives elements it has. Called after commit
(`transaction.on_commit`) so a page never shows a state the database does not hold.
"""
from __future__ import annotations

import logging

from django.template.loader import render_to_string

from playground.realtime import send_to_group

STATUS_GROUP = "mcp-status"
STATUS_MESSAGE_TYPE = "status.update"

logger = logging.getLogger(__name__)


def server_group(server_id: int) -> str:
    return f"{STATUS_GROUP}-{server_id}"


def render_status_fragment(server, *, with_summary: bool, tools_changed: bool = False) -> str:
    return render_to_string(
        "mcp_servers/_status_oob.html", {"server": server, "with_summary": with_summary, "tools_changed": tools_changed}
    )


def render_row_fragment(server_id: int) -> str:
    from playground.mcp_servers.selectors import servers_with_tool_counts

    server = servers_with_tool_counts().filter(pk=server_id).first()
    if server is None:
        return ""
    return render_to_string("mcp_servers/_server_row.html", {"server": server, "oob": True})


def broadcast_server_status(server_id: int, *, tools_changed: bool = False) -> None:
    """Push the current status of one server to every open page. Never raises (a page can reload).

    With `tools_changed`, detail pages also get an element that makes them fetch the tool table
    again (`server_tools`): the table holds call forms whose state depends on the viewer's role,
    which a broadcast cannot know."""
    from playground.mcp_servers.models import McpServer

    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return
    try:
        send_to_group(STATUS_GROUP, {"type": STATUS_MESSAGE_TYPE, "html": render_row_fragment(server_id)})
        send_to_group(server_group(server_id), {"type": STATUS_MESSAGE_TYPE, "html": render_status_fragment(server, with_summary=True, tools_changed=tools_changed)})
    except Exception:
        logger.warning("could not broadcast the status of MCP server %s", server_id, exc_info=True)
