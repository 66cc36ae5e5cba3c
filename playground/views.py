"""Project-level pages: the home dashboard and a health check."""
from __future__ import annotations

from django.db import connection
from django.http import JsonResponse
from django.db.models import Count, Sum
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_safe

from playground.access import VIEWER, role_required
from playground.mcp_servers.models import McpServer
from playground.registry import adapter
from playground.registry.models import AgentProfile, Tool


@role_required(VIEWER)
@require_safe
def home(request):
    tools = Tool.objects.filter(enabled=True).aggregate(
        count=Count("id"), tokens=Sum("token_estimate")
    )
    # Deferred as every other page counts it (the model view, a turn): the enabled catalog after the
    # global permission rules, so a tool a deny rule removes is not counted as deferred.
    _catalog, filtered = adapter.filtered_catalog(None)
    context = {
        "tool_count": tools["count"],
        "deferred_count": len(list(filtered.permitted.deferred)),
        "denied_count": len(filtered.excluded),
        # "If all were sent": the tools a request could carry, so not those a deny rule removes. The
        # registry's per-tool estimates summed, as the tool list sums them (which keeps denied tools);
        # the model view counts the request's own tool dicts, so its figure differs by a fraction of a percent.
        "tool_tokens": (tools["tokens"] or 0) - _tokens_of(filtered.excluded_names),
        "server_count": McpServer.objects.count(),
        "profile_count": AgentProfile.objects.count(),
    }
    return render(request, "home.html", context)


def _tokens_of(names: list[str]) -> int:
    total = 0
    for start in range(0, len(names), 500):  # bounded IN lists, whatever a deny rule removes
        total += Tool.objects.filter(enabled=True, name__in=names[start:start + 500]).aggregate(t=Sum("token_estimate"))["t"] or 0
    return total


@require_safe
def favicon(request):
    """Browsers ask for /favicon.ico where a page names no icon (a JSON download, an error page)."""
    return redirect(static("img/favicon.svg"), permanent=True)


@require_safe
def healthz(request):
    """Liveness for docker-compose and `make run`: the process answers and the database is reachable."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})
