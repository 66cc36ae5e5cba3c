"""Celery tasks of the MCP app: thin wrappers around services."""
from __future__ import annotations

from typing import Any

from playground.celery_app import app


@app.task(name="mcp_servers.sync_server")
def sync_server_task(server_id: int) -> dict[str, Any]:
    from playground.mcp_servers import services
    from playground.mcp_servers.models import McpServer

    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return {"ok": False, "error": f"MCP server {server_id} no longer exists"}
    return services.sync_server(server).to_dict()
