"""Celery tasks of the MCP app: thin wrappers around services."""
from __future__ import annotations

from typing import Any

from celery.signals import worker_process_shutdown

from playground.celery_app import app
from playground.heartbeat import Heartbeat
from playground.mcp_servers import services
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.session_pool import session_pool


@app.task(name="mcp_servers.sync_server")
def sync_server_task(server_id: int) -> dict[str, Any]:
    services.claim_sync(server_id)
    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return {"ok": False, "error": f"MCP server {server_id} no longer exists"}
    try:
        # A killed worker's sync is failed by the sweep once this heartbeat goes stale.
        with Heartbeat(lambda: services.touch_sync(server_id), what=f"sync of MCP server {server_id}"):
            return services.sync_server(server).to_dict()
    finally:
        services.end_sync_heartbeat(server_id)


@worker_process_shutdown.connect
def close_pooled_sessions(**kwargs: Any) -> None:
    """A worker process going away closes its MCP sessions (stdio children are stopped and reaped)."""
    session_pool().close_all()
