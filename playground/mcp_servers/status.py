"""Live status badges: one function renders and broadcasts a server's status to open pages.

Pages join the `mcp-status` group through `consumers.McpStatusConsumer` (`ws/mcp/status/`, htmx ws
extension). The message is HTML whose elements carry `hx-swap-oob`, so the badge (and on the
detail page, the last error and sync time) are replaced in place. Called after commit
(`transaction.on_commit`) so a page never shows a state the database does not hold.
"""
from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

STATUS_GROUP = "mcp-status"
STATUS_MESSAGE_TYPE = "status.update"

logger = logging.getLogger(__name__)


def render_status_fragment(server) -> str:
    return render_to_string("mcp_servers/_status_oob.html", {"server": server})


def broadcast_server_status(server_id: int) -> None:
    """Push the current status of one server to every open page. Never raises (a page can reload)."""
    from playground.mcp_servers.models import McpServer

    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        async_to_sync(layer.group_send)(
            STATUS_GROUP, {"type": STATUS_MESSAGE_TYPE, "html": render_status_fragment(server), "server_id": server_id}
        )
    except Exception:  # noqa: BLE001 - Redis down must not break a sync; the page shows it on reload
        logger.warning("could not broadcast the status of MCP server %s", server_id, exc_info=True)
