"""Reads for the MCP server pages (one query per list, whatever the number of servers or tools)."""
from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from playground.mcp_servers.models import McpServer


def servers_with_tool_counts() -> QuerySet[McpServer]:
    return McpServer.objects.annotate(
        tool_count=Count("tools"),
        always_loaded_count=Count("tools", filter=Q(tools__always_load=True)),
    ).order_by("name")


def server_tools(server: McpServer):
    return server.tools.order_by("name")
