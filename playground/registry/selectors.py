"""Registry reads shared by pages: the filtered tool list and its totals."""
from __future__ import annotations

from collections.abc import Mapping

from django.db.models import Count, Q, QuerySet, Sum

from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool

YES_NO = {"yes": True, "no": False}


def filter_tools(params: Mapping[str, str]) -> QuerySet[Tool]:
    """Tools matching the list page's filters: q, deferred, always_load, enabled (yes/no), server, source."""
    tools = Tool.objects.select_related("server")
    query = (params.get("q") or "").strip()
    if query:
        tools = tools.filter(Q(name__icontains=query) | Q(description__icontains=query) | Q(search_hint__icontains=query))
    for param, field in (("deferred", "deferred"), ("always_load", "always_load"), ("enabled", "enabled")):
        value = YES_NO.get(params.get(param) or "")
        if value is not None:
            tools = tools.filter(**{field: value})
    server = (params.get("server") or "").strip()
    if server:
        tools = tools.filter(Q(server__name=server) | Q(server__isnull=True, server_name=server))
    source = params.get("source") or ""
    if source in Tool.Source.values:
        tools = tools.filter(source=source)
    return tools


def tool_totals(tools: QuerySet[Tool]) -> dict[str, int]:
    """Count and token cost of a filtered list, in one query."""
    totals = tools.order_by().aggregate(count=Count("id"), tokens=Sum("token_estimate"))
    return {"count": totals["count"] or 0, "tokens": totals["tokens"] or 0}


def server_names() -> list[str]:
    """Every server a tool can belong to: registered servers and imported catalogs' server names."""
    registered = set(McpServer.objects.values_list("name", flat=True))
    imported = set(Tool.objects.exclude(server_name="").order_by().values_list("server_name", flat=True).distinct())
    return sorted(registered | imported)
