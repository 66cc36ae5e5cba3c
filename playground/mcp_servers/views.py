"""MCP server pages: list (live status), create / edit (secrets masked), detail with test, sync and
a "call this tool" form per tool. Viewers read; admins edit, test, sync and call."""
from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, VIEWER, role_required
from playground.mcp_servers import selectors, services
from playground.mcp_servers.connection import McpConnectionError, check_connection
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.forms import SECRET_MASK, McpServerForm, ToolCallForm
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.session_pool import session_pool
from playground.mcp_servers.transports import ServerConfig

# Polls of the sync progress fragment before it says the task may not be running.
WORKER_HINT_AFTER_POLLS = 20


# Viewers read; changing, testing or syncing a server (a stdio command runs on the web and worker
# hosts) or calling its tools is for admins.
admin_only = role_required(ADMIN, message="Only admins can change MCP servers or call their tools.")


def _masked(values: dict[str, str]) -> dict[str, str]:
    return {key: SECRET_MASK for key in (values or {})}


@role_required(VIEWER)
@require_safe
def server_list(request: HttpRequest) -> HttpResponse:
    servers = list(selectors.servers_with_tool_counts())
    return render(request, "mcp_servers/server_list.html", {"servers": servers})


@admin_only
def server_create(request: HttpRequest) -> HttpResponse:
    form = McpServerForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            server = form.save()
            services.request_sync(server)
        messages.success(request, f"Server {server.name} saved; its first sync is queued.")
        return redirect("mcp_servers:server_detail", pk=server.pk)
    return render(request, "mcp_servers/server_form.html", {"form": form, "server": None})


@admin_only
def server_edit(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    before = ServerConfig.from_server(server)
    old_name = server.name
    form = McpServerForm(request.POST or None, instance=server)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            server = form.save()
            changed = ServerConfig.from_server(server) != before or server.name != old_name
            resync = server.enabled and (changed or server.status == McpServer.Status.DISABLED)
            if resync:
                services.request_sync(server)
            elif not server.enabled:
                services.set_status(server, McpServer.Status.DISABLED)
        if changed:
            session_pool_discard(server.pk)
        messages.success(request, f"Server {server.name} saved" + ("; a new sync is queued." if resync else "."))
        return redirect("mcp_servers:server_detail", pk=server.pk)
    return render(request, "mcp_servers/server_form.html", {"form": form, "server": server})


def session_pool_discard(server_id: int) -> None:
    """Close this process's pooled sessions of a server whose config changed (others reconnect on use)."""
    try:
        session_pool().discard(server_id)
    except Exception:  # noqa: BLE001 - a stale session is replaced on next use anyway
        pass


@admin_only
@require_POST
def server_delete(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    name = server.name
    server.delete()  # its tool rows go with it (FK cascade)
    session_pool_discard(pk)
    messages.success(request, f"Server {name} and its tools were removed.")
    return redirect("mcp_servers:server_list")


def _tools_with_call_forms(server: McpServer) -> list:
    tools = list(selectors.server_tools(server))
    for tool in tools:
        tool.call_form = ToolCallForm(tool.input_schema, prefix=f"t{tool.pk}")
        tool.schema_json = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
    return tools


@role_required(VIEWER)
@require_safe
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    tools = _tools_with_call_forms(server)
    return render(
        request,
        "mcp_servers/server_detail.html",
        {
            "server": server,
            "tools": tools,
            "masked_env": _masked(server.env),
            "masked_headers": _masked(server.headers),
            "config": ServerConfig.from_server(server),
        },
    )


@admin_only
@require_POST
def server_test(request: HttpRequest, pk: int) -> HttpResponse:
    """Connect, initialize and count tools now (in this request); the stored status is untouched."""
    server = get_object_or_404(McpServer, pk=pk)
    context: dict[str, Any] = {"server": server}
    try:
        context["probe"] = check_connection(ServerConfig.from_server(server))
    except McpConnectionError as exc:
        context["error"] = scrub_for(server, str(exc))
    return render(request, "mcp_servers/_test_result.html", context)


@admin_only
@require_POST
def server_sync(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a sync on a Celery worker; the fragment polls until the server leaves `pending`."""
    server = get_object_or_404(McpServer, pk=pk)
    if not server.enabled:
        return render(request, "mcp_servers/_sync_progress.html", {"server": server, "disabled": True})
    with transaction.atomic():
        services.request_sync(server)
    server.refresh_from_db()
    if not request.htmx:
        messages.info(request, f"Sync of {server.name} queued.")
        return redirect("mcp_servers:server_detail", pk=server.pk)
    return render(request, "mcp_servers/_sync_progress.html", {"server": server, "polls": 0})


@role_required(VIEWER)
@require_safe
def server_sync_progress(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    try:
        polls = int(request.GET.get("polls", "0")) + 1
    except ValueError:
        polls = 1
    context: dict[str, Any] = {
        "server": server,
        "polls": polls,
        "worker_hint": polls >= WORKER_HINT_AFTER_POLLS,
        "finished": server.status != McpServer.Status.PENDING,
    }
    if context["finished"]:
        context["tools"] = _tools_with_call_forms(server)
    return render(request, "mcp_servers/_sync_progress.html", context)


@admin_only
@require_POST
def tool_call(request: HttpRequest, pk: int, tool_pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    tool = get_object_or_404(server.tools.all(), pk=tool_pk)
    form = ToolCallForm(tool.input_schema, request.POST, prefix=f"t{tool.pk}")
    context: dict[str, Any] = {"server": server, "tool": tool, "form": form}
    if form.is_valid():
        arguments = form.cleaned_data["arguments"]
        outcome, raw = call_registered_tool(server, tool.name, arguments, timeout=form.cleaned_data["timeout"])
        context.update(
            outcome=outcome,
            raw=raw,
            arguments_json=json.dumps(arguments, indent=2, ensure_ascii=False),
            structured_json=json.dumps(outcome.structured, indent=2, ensure_ascii=False) if outcome.structured is not None else "",
            images=[c for c in (raw.content if raw else []) if c.get("type") == "image"],
        )
    template = "mcp_servers/_tool_call_result.html" if request.htmx else "mcp_servers/tool_call_page.html"
    return render(request, template, context)
