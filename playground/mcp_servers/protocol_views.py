"""A server's Protocol view (admins): the JSON-RPC transcript of our client's connections to it, in
order, MRTR rounds under their request, and its JSON download (protocol_log.py). Shown on load
(a reload shows what came since): the messages are written in batches, not pushed one by one."""
from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_safe

from playground.access import ADMIN, role_required
from playground.mcp_servers import protocol_log
from playground.mcp_servers.models import McpServer

# The transcript shows what the server returned and what we sent it: admins only, like its log.
admin_only = role_required(ADMIN, message="Only admins can see a server's protocol transcript.")


def render_transcript(request: HttpRequest, scope: str, *, title: str, back_url: str, back_label: str,
                      export_url: str, perspective: str) -> HttpResponse:
    messages = protocol_log.transcript(scope)
    return render(request, "mcp_servers/protocol.html", {
        "title": title, "back_url": back_url, "back_label": back_label, "export_url": export_url,
        "exchanges": protocol_log.exchanges(messages), "message_count": len(messages),
        "keep": protocol_log.keep_messages(), "perspective": perspective,
    })


def export_transcript(scope: str, filename: str) -> HttpResponse:
    body = json.dumps({"scope": scope, "messages": protocol_log.export(scope)}, indent=2, ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@admin_only
@require_safe
def server_protocol(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    return render_transcript(
        request, protocol_log.server_scope(server.pk), title=f"{server.name}: protocol",
        back_url=reverse("mcp_servers:server_detail", args=[server.pk]), back_label=server.name,
        export_url=reverse("mcp_servers:server_protocol_export", args=[server.pk]), perspective="client",
    )


@admin_only
@require_safe
def server_protocol_export(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    return export_transcript(protocol_log.server_scope(server.pk), f"{server.name}-protocol.json")
