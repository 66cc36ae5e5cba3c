"""The "Try a server" page: a scratch connection that lists and calls a server's tools without
registering it (scratch.py). Editors may try a URL; only admins see, or may send, a command."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from playground.access import ADMIN, EDITOR, has_role, role_required
from playground.mcp_servers import scratch

COMMAND_FIELDS = ("command", "args_text", "env_text")


@role_required(EDITOR)
def server_try(request: HttpRequest) -> HttpResponse:
    allow_commands = has_role(request.user, ADMIN)
    if request.method != "POST":
        form = scratch.ScratchConnectionForm(allow_commands=allow_commands)
        return render(request, "mcp_servers/scratch.html", {"form": form, "allow_commands": allow_commands})
    if not allow_commands and (request.POST.get("transport") == "stdio" or any(request.POST.get(f) for f in COMMAND_FIELDS)):
        raise PermissionDenied("Only admins can try a server started by a command.")
    form = scratch.ScratchConnectionForm(request.POST, allow_commands=allow_commands)
    if not form.is_valid():
        return render(request, "mcp_servers/_scratch_outcome.html", {"form_errors": form.errors}, status=400)
    config = form.config()
    if request.POST.get("action") == "call":
        return _call(request, config)
    try:
        listing = scratch.list_tools(config)
    except Exception as exc:  # noqa: BLE001 - whatever the server did, the page says it, scrubbed
        return render(request, "mcp_servers/_scratch_outcome.html", {"error": scratch.error_text(config, exc)})
    return render(request, "mcp_servers/_scratch_tools.html", {"listing": listing, "allow_register": allow_commands})


def _call(request: HttpRequest, config) -> HttpResponse:
    index = request.POST.get("call_tool", "")
    name = request.POST.get(f"tool__{index}", "") if index.isdigit() else ""
    if not name or len(name) > 200:
        return render(request, "mcp_servers/_scratch_outcome.html", {"error": "Choose a tool to call (list the tools first)."}, status=400)
    try:
        arguments = scratch.parse_arguments(request.POST.get(f"args__{index}", ""))
    except ValueError as exc:
        return render(request, "mcp_servers/_scratch_outcome.html", {"error": f"Arguments: {exc}", "tool": name}, status=400)
    try:
        result = scratch.call_tool(config, name, arguments)
    except Exception as exc:  # noqa: BLE001 - as above
        return render(request, "mcp_servers/_scratch_outcome.html", {"error": scratch.error_text(config, exc), "tool": name})
    return render(request, "mcp_servers/_scratch_outcome.html", {"result": scratch.shown_result(config, result), "tool": name})
