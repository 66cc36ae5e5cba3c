"""MCP server pages: list (live status), create / edit (secrets masked), detail with test, sync and
a "call this tool" form per tool. Viewers read; admins edit, test, sync and call."""
from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.paginator import Paginator
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, VIEWER, has_role, role_required
from mcp.shared.exceptions import MCPError

from playground.mcp_servers import config_files, protocol_log, selectors, server_log, server_requests, services, workbench_calls
from playground.mcp_servers.connection import McpConnection, McpConnectionError, check_connection, shown_contents
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.forms import SECRET_MASK, McpServerForm, PromptArgumentsForm, RootsForm, ToolCallForm
from playground.mcp_servers.models import McpCallRecord, McpServer, McpServerRequest
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.session_pool import session_pool, workbench_pool
from playground.mcp_servers.transports import ServerConfig
from mcp.types import PromptReference, ResourceTemplateReference
from uritemplate import URITemplate

from playground.queueing import queue_task
from playground.registry.models import AgentProfile

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
            if "always_load" in form.changed_data:
                services.refresh_tool_loading(server)
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
    for pool in (session_pool(), workbench_pool()):
        try:
            pool.discard(server_id)
        except Exception:  # noqa: BLE001 - a stale session is replaced on next use anyway
            pass


@admin_only
@require_POST
def server_delete(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    name = server.name
    server.delete()  # its tool rows and call history go with it (FK cascade)
    session_pool_discard(pk)
    server_log.forget(pk)
    protocol_log.forget(protocol_log.server_scope(pk))
    messages.success(request, f"Server {name} and its tools were removed.")
    return redirect("mcp_servers:server_list")


# A server's page shows its tools a page at a time, each schema cut: a server of 10,000 tools (or
# of huge schemas) gives a page of bounded size, whoever views it.
TOOLS_PER_PAGE = 25
SHOWN_SCHEMA_CHARS = 4000


def _tools_with_call_forms(server: McpServer, page_number: Any = 1) -> tuple[list, Any]:
    """(this page's tools, each with its call form and schema; the page). A tool whose schema is
    large gets neither here: its row loads them when opened (`tool_body`), so a page of such tools
    stays small."""
    page = Paginator(selectors.server_tools(server), TOOLS_PER_PAGE).get_page(page_number)
    tools = list(page.object_list)
    for tool in tools:
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
        if len(schema) > SHOWN_SCHEMA_CHARS:
            tool.body_deferred = True
            tool.schema_chars = len(schema)
            continue
        tool.call_form = ToolCallForm(tool.input_schema, prefix=f"t{tool.pk}")
        tool.schema_json = schema
    return tools, page


@role_required(VIEWER)
@require_safe
def tool_body(request: HttpRequest, pk: int, tool_pk: int) -> HttpResponse:
    """One tool's schema and call form: what its row shows when opened, for a tool too large to
    render inline on the server's page."""
    server = get_object_or_404(McpServer, pk=pk)
    tool = get_object_or_404(server.tools, pk=tool_pk)
    tool.call_form = ToolCallForm(tool.input_schema, prefix=f"t{tool.pk}")
    tool.schema_json = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
    return render(request, "mcp_servers/_tool_body.html", {"server": server, "tool": tool})


@role_required(VIEWER)
@require_safe
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    tools, tools_page = _tools_with_call_forms(server, request.GET.get("tools_page"))
    return render(
        request,
        "mcp_servers/server_detail.html",
        {
            "server": server,
            "tools": tools,
            "tools_page": tools_page,
            "masked_env": _masked(server.env),
            "masked_headers": _masked(server.headers),
            "config": ServerConfig.from_server(server),
            # The live log and the history show what the server printed and returned: admins only.
            "log_lines": server_log.recent_lines(server.pk) if has_role(request.user, ADMIN) else [],
            "notification_lines": server_log.recent_notifications(server.pk) if has_role(request.user, ADMIN) else [],
            "history": _history(server) if has_role(request.user, ADMIN) else [],
            "server_requests": server_requests.shown_requests(server.pk) if has_role(request.user, ADMIN) else [],
            "sampling_profiles": server_requests.sampling_profiles() if has_role(request.user, ADMIN) else [],
            "roots_form": RootsForm(initial={"roots_text": RootsForm.text_of(server.roots)}),
            "log_levels": LOG_LEVELS,
        },
    )


@admin_only
@require_POST
def server_test(request: HttpRequest, pk: int) -> HttpResponse:
    """Connect, initialize and count tools now (in this request); the stored status is untouched."""
    server = get_object_or_404(McpServer, pk=pk)
    context: dict[str, Any] = {"server": server}
    try:
        config = ServerConfig.from_server(server)
        context["probe"] = check_connection(config, transcript=protocol_log.transcript_for_server(server.pk, config))
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
        context["tools"], context["tools_page"] = _tools_with_call_forms(server)
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
        if not server.enabled:
            outcome, raw = call_registered_tool(server, tool.name, arguments)  # says it is disabled, runs nothing
            server_log.record_call(server, kind=McpCallRecord.Kind.TOOL, name=tool.name, arguments=arguments, ok=False,
                                   result=outcome.content, duration_ms=outcome.duration_ms, user=request.user)
            context.update(outcome=outcome, raw=None, arguments_json=json.dumps(arguments, indent=2, ensure_ascii=False),
                           history=_history(server))
        else:
            # Through the workbench's own session, which answers the server's requests (sampling) by
            # asking the person: when the server asks, this returns at once and the result is pushed.
            call = workbench_calls.start(server, tool, arguments, timeout=form.cleaned_data["timeout"], user=request.user,
                                         pool=workbench_pool())
            finished = workbench_calls.wait(call)
            if finished is None:
                return render(request, "mcp_servers/_tool_call_waiting.html", context)
            context.update(finished)
    template = "mcp_servers/_tool_call_result.html" if request.htmx else "mcp_servers/tool_call_page.html"
    return render(request, template, context)


# --- the workbench: tool table refresh, ping, resources, prompts, history -----------------------
# Ping, listing and reading resources and getting prompts all run the server's code (a stdio
# server is started on this host), so they need the role that may call tools: admin.

def _history(server: McpServer) -> list[McpCallRecord]:
    return server_log.history(server)


@role_required(VIEWER)
@require_safe
def server_tools(request: HttpRequest, pk: int) -> HttpResponse:
    """The tool table alone: fetched again by a detail page when a sync changed the tools."""
    server = get_object_or_404(McpServer, pk=pk)
    tools, tools_page = _tools_with_call_forms(server, request.GET.get("tools_page"))
    return render(request, "mcp_servers/_tool_table.html", {"server": server, "tools": tools, "tools_page": tools_page})


@admin_only
@require_safe
def server_history(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    return render(request, "mcp_servers/_history.html", {"server": server, "history": _history(server)})


def _workbench(
    request: HttpRequest,
    server: McpServer,
    *,
    kind: str,
    name: str,
    arguments: dict[str, Any] | None,
    operation: Callable[[McpConnection], Awaitable[Any]],
    summary: Callable[[Any], Any] = lambda value: value,
    measured: Callable[[Any], float] | None = None,
) -> dict[str, Any]:
    """Run one workbench operation on the server's pooled session; keep it in the history and keep
    the shown status true (a server that died under the call is Failed). Never raises for server trouble."""
    started = time.perf_counter()
    value: Any = None
    error = ""
    if not server.enabled:
        error = f"MCP server {server.name!r} is disabled: enable it to use the workbench."
    else:
        try:
            value = workbench_pool().run(server.pk, ServerConfig.from_server(server), operation)
            services.note_call_outcome(server, None)
        except McpConnectionError as exc:
            error = scrub_for(server, str(exc))
            services.note_call_outcome(server, exc)
        except MCPError as exc:  # the server answered with an error (unknown resource, bad arguments)
            error = scrub_for(server, f"the server answered with error {exc.code}: {exc}")
    total_ms = (time.perf_counter() - started) * 1000
    # What the operation measured itself (a ping's round trip), else the whole call: the history row
    # then shows the figure the result shows, not one that includes opening the session.
    duration_ms = measured(value) if measured is not None and not error else total_ms
    server_log.record_call(
        server, kind=kind, name=name, arguments=arguments, ok=not error,
        result=error or summary(value), duration_ms=duration_ms, user=request.user,
    )
    return {"server": server, "value": value, "error": error, "duration_ms": duration_ms, "total_ms": total_ms,
            "history": _history(server)}


@admin_only
@require_POST
def server_ping(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)

    async def ping(connection: McpConnection) -> float:
        return await connection.timed_ping()

    context = _workbench(request, server, kind=McpCallRecord.Kind.PING, name="ping", arguments=None, operation=ping,
                         summary=lambda ms: f"round trip {ms:.1f} ms", measured=lambda ms: ms)
    return render(request, "mcp_servers/_ping_result.html", context)


async def _listing(connection: McpConnection, what: str) -> dict[str, Any]:
    """Resources or prompts, or None when the server's capabilities leave them out (not an error)."""
    if not connection.capabilities[what]:
        return {"supported": False, "items": []}
    items = await (connection.list_resources() if what == "resources" else connection.list_prompts())
    return {"supported": True, "items": items, "subscribe": connection.capabilities["subscribe"],
            "completions": connection.capabilities["completions"]}


def _listing_summary(what: str):
    return lambda value: f"{len(value['items'])} {what}" if value["supported"] else f"the server offers no {what}"


@admin_only
@require_POST
def resource_list(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    context = _workbench(request, server, kind=McpCallRecord.Kind.LIST, name="resources/list", arguments=None,
                         operation=lambda c: _listing(c, "resources"), summary=_listing_summary("resources"))
    return render(request, "mcp_servers/_resources.html", context)


@admin_only
@require_POST
def resource_read(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    uri = request.POST.get("uri", "").strip()
    if not uri or len(uri) > MAX_URI_CHARS:
        return HttpResponseBadRequest(f"Give the resource's uri (at most {MAX_URI_CHARS} characters).")
    return _read_resource(request, server, uri)


MAX_URI_CHARS = 2000


def _read_resource(request: HttpRequest, server: McpServer, uri: str, *, template: str = "") -> HttpResponse:
    async def read(connection: McpConnection) -> list[dict[str, Any]]:
        return shown_contents(await connection.read_resource(uri))

    def summary(contents: list[dict[str, Any]]) -> Any:
        return [{k: v for k, v in item.items() if k != "image_data"} for item in contents]

    arguments = {"uri": uri, "template": template} if template else {"uri": uri}
    context = _workbench(request, server, kind=McpCallRecord.Kind.RESOURCE, name=uri, arguments=arguments,
                         operation=read, summary=summary)
    context["uri"] = uri
    return render(request, "mcp_servers/_resource_contents.html", context)


@admin_only
@require_POST
def resource_templates(request: HttpRequest, pk: int) -> HttpResponse:
    """The server's resource templates, each with a form for its variables (RFC 6570)."""
    server = get_object_or_404(McpServer, pk=pk)

    async def listing(connection: McpConnection) -> dict[str, Any]:
        if not connection.capabilities["resources"]:
            return {"supported": False, "items": []}
        return {"supported": True, "items": await connection.list_resource_templates(),
                "completions": connection.capabilities["completions"]}

    context = _workbench(request, server, kind=McpCallRecord.Kind.LIST, name="resources/templates/list", arguments=None,
                         operation=listing, summary=_listing_summary("resource templates"))
    for number, item in enumerate((context["value"] or {}).get("items", []), start=1):
        try:
            names = list(URITemplate(item.get("uriTemplate") or "").variable_names)
        except Exception:  # noqa: BLE001 - a template we cannot read is shown without a form
            item["variables"] = None
            continue
        item["variables"] = [
            {"name": name, "id": f"tvar-{number}-{name}",
             "attrs": _completion_attrs(server, f"tvar-{number}-{name}", "template", name) if context["value"]["completions"] else {}}
            for name in names]
    return render(request, "mcp_servers/_resource_templates.html", context)


@admin_only
@require_POST
def resource_template_read(request: HttpRequest, pk: int) -> HttpResponse:
    """Fill a template's variables (each `var__<name>`), expand it (RFC 6570, values encoded as the
    template says) and read the resource at that URI."""
    server = get_object_or_404(McpServer, pk=pk)
    template = request.POST.get("template", "").strip()
    if not template or len(template) > MAX_URI_CHARS:
        return HttpResponseBadRequest(f"Give the template (at most {MAX_URI_CHARS} characters).")
    try:
        parsed = URITemplate(template)
    except Exception:  # noqa: BLE001 - any parse failure is the client's bad input
        return HttpResponseBadRequest("That is not a URI template.")
    values = {name: request.POST.get(f"var__{name}", "") for name in parsed.variable_names}
    values = {name: value for name, value in values.items() if value != ""}
    uri = parsed.expand(values)
    if len(uri) > MAX_URI_CHARS:
        return HttpResponseBadRequest(f"The filled URI is longer than {MAX_URI_CHARS} characters.")
    return _read_resource(request, server, uri, template=template)


@admin_only
@require_POST
def resource_subscribe(request: HttpRequest, pk: int) -> HttpResponse:
    """Subscribe the workbench's session to a resource (or unsubscribe it); the server's
    `notifications/resources/updated` then arrive in the server log, live."""
    server = get_object_or_404(McpServer, pk=pk)
    uri = request.POST.get("uri", "").strip()
    action = request.POST.get("action", "subscribe")
    if not uri or len(uri) > MAX_URI_CHARS or action not in ("subscribe", "unsubscribe"):
        return HttpResponseBadRequest("Give the resource's uri and action subscribe or unsubscribe.")

    async def change(connection: McpConnection) -> bool:
        if not connection.capabilities["subscribe"]:
            return False
        await (connection.subscribe_resource(uri) if action == "subscribe" else connection.unsubscribe_resource(uri))
        return True

    kind = McpCallRecord.Kind.SUBSCRIBE if action == "subscribe" else McpCallRecord.Kind.UNSUBSCRIBE
    context = _workbench(request, server, kind=kind, name=uri, arguments={"uri": uri}, operation=change,
                         summary=lambda done: f"{action}d" if done else "the server offers no subscriptions")
    context.update(uri=uri, action=action)
    return render(request, "mcp_servers/_subscription.html", context)


@admin_only
@require_POST
def prompt_list(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    context = _workbench(request, server, kind=McpCallRecord.Kind.LIST, name="prompts/list", arguments=None,
                         operation=lambda c: _listing(c, "prompts"), summary=_listing_summary("prompts"))
    if context["value"]:
        completable = context["value"].get("completions", False)
        for index, prompt in enumerate(context["value"]["items"]):
            prompt["form"] = PromptArgumentsForm(prompt.get("arguments") or [], auto_id=f"prompt{index}-%s")
            prompt["arguments_json"] = json.dumps(prompt.get("arguments") or [])
            prompt["completable"] = completable
            if completable:
                for key, field in prompt["form"].fields.items():
                    field.widget.attrs.update(_completion_attrs(server, f"prompt{index}-{key}", "prompt",
                                                                key.removeprefix(PromptArgumentsForm.PREFIX)))
    return render(request, "mcp_servers/_prompts.html", context)


@admin_only
@require_POST
def prompt_get(request: HttpRequest, pk: int) -> HttpResponse:
    """Get one prompt; the page sends the prompt's declared arguments back, so the form is checked
    here (required ones filled) before the server is asked."""
    server = get_object_or_404(McpServer, pk=pk)
    name = request.POST.get("name", "").strip()
    try:
        declared = json.loads(request.POST.get("declared", "[]") or "[]")
        if not isinstance(declared, list) or not all(isinstance(a, dict) for a in declared):
            raise ValueError
    except ValueError:
        return HttpResponseBadRequest("declared must be the prompt's argument list as JSON.")
    if not name or len(name) > 500:
        return HttpResponseBadRequest("Give the prompt's name.")
    form = PromptArgumentsForm(declared, request.POST)
    if not form.is_valid():
        # htmx swaps only 2xx answers: the page gets the errors with a 200, any other client a 400.
        return render(request, "mcp_servers/_prompt_result.html", {"server": server, "name": name, "form": form},
                      status=200 if request.htmx else 400)
    arguments = form.arguments()

    async def get(connection: McpConnection) -> dict[str, Any]:
        return await connection.get_prompt(name, arguments)

    context = _workbench(request, server, kind=McpCallRecord.Kind.PROMPT, name=name, arguments=arguments, operation=get)
    context.update(name=name, form=form, result_json=json.dumps(context["value"], indent=2, ensure_ascii=False) if context["value"] else "")
    return render(request, "mcp_servers/_prompt_result.html", context)


# --- what a server asks mid-call (sampling): answered by a person, or by a profile's model ----------
SAMPLING_TASK = "conversations.answer_sampling_request"  # conversations/tasks.py; queued by name (it sits above us)
MAX_ANSWER_CHARS = 20_000


@admin_only
@require_POST
def server_request_answer(request: HttpRequest, pk: int, request_pk: int) -> HttpResponse:
    """Answer a server's pending request: by hand (the text typed), declined, or by a profile's model
    (a Celery task asks it, so no web process waits on a model)."""
    server = get_object_or_404(McpServer, pk=pk)
    row = get_object_or_404(McpServerRequest.objects.filter(server=server), pk=request_pk)
    action = request.POST.get("action", "")
    error = ""
    form = None
    if row.kind == McpServerRequest.Kind.ELICITATION:
        if action not in ("accept", "decline", "cancel"):
            return HttpResponseBadRequest("action must be accept, decline or cancel.")
        if not row.is_pending:
            error = f"This request is no longer waiting ({row.get_status_display().lower()})."
        elif action == "accept":
            form = server_requests.elicitation_form(row, request.POST)
            if row.params.get("mode") == "url":
                server_requests.answer(row.pk, status=McpServerRequest.Status.ANSWERED, user=request.user, with_label="by hand",
                                       result={"action": "accept"})
            elif form.is_valid():
                server_requests.answer(row.pk, status=McpServerRequest.Status.ANSWERED, user=request.user, with_label="by hand",
                                       result={"action": "accept", "content": form.content()})
            else:
                error = "Check the fields: the server's schema asks for them so."
        else:
            status = McpServerRequest.Status.DECLINED if action == "decline" else McpServerRequest.Status.CANCELLED
            server_requests.answer(row.pk, status=status, user=request.user, with_label=action, result={"action": action})
    elif not row.is_pending:
        error = f"This request is no longer waiting ({row.get_status_display().lower()})."
    elif action == "answer":
        text = request.POST.get("text", "").strip()
        if not text:
            error = "Type the answer to send, or decline."
        elif len(text) > MAX_ANSWER_CHARS:
            error = f"The answer is too long (at most {MAX_ANSWER_CHARS} characters)."
        else:
            server_requests.answer(row.pk, status=McpServerRequest.Status.ANSWERED, user=request.user, with_label="by hand",
                                   result=server_requests.sampling_result(text, model=f"typed by {request.user.get_username()} at the workbench"))
    elif action == "decline":
        server_requests.answer(row.pk, status=McpServerRequest.Status.DECLINED, user=request.user, with_label="declined", result={})
    elif action == "model":
        profile = AgentProfile.objects.filter(pk=request.POST.get("profile") or 0).first() if (request.POST.get("profile") or "").isdigit() else None
        if profile is None:
            error = "Choose the profile whose model should answer."
        else:
            transaction.on_commit(lambda: queue_task(SAMPLING_TASK, row.pk, profile.pk, request.user.pk))
            row.note = f"Asked the model of profile {profile.name}; its answer is sent when it comes."
            McpServerRequest.objects.filter(pk=row.pk, status=McpServerRequest.Status.PENDING).update(note=row.note)
    else:
        return HttpResponseBadRequest("action must be answer, decline or model.")
    row.refresh_from_db()
    return render(request, "mcp_servers/_server_request.html",
                  {"req": server_requests.prepared(row, form if error else None), "server_id": server.pk, "error": error, "sampling_profiles": server_requests.sampling_profiles()})


# --- roots: what the workbench's session offers the server as its roots -----------------------------
@admin_only
@require_POST
def server_roots(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the server's roots and tell an open workbench session they changed
    (`notifications/roots/list_changed`); the server asks `roots/list` again when it wants them."""
    server = get_object_or_404(McpServer, pk=pk)
    form = RootsForm(request.POST)
    context: dict[str, Any] = {"server": server, "roots_form": form}
    if form.is_valid():
        server.roots = form.cleaned_data["roots_text"]
        server.save(update_fields=["roots", "updated_at"])
        context["saved"] = True
        try:
            context["notified"] = workbench_pool().notify_open_session(
                server.pk, ServerConfig.from_server(server), lambda connection: connection.send_roots_list_changed())
        except (McpConnectionError, MCPError, TimeoutError) as exc:
            context["notify_error"] = scrub_for(server, str(exc) or exc.__class__.__name__)
        if context.get("notified"):
            server_log.record(server.pk, [("session", "sent notifications/roots/list_changed: "
                                                      f"{len(server.roots)} root(s) now")], server)
        context["roots_form"] = RootsForm(initial={"roots_text": RootsForm.text_of(server.roots)})
    return render(request, "mcp_servers/_roots.html", context, status=200 if form.is_valid() or request.htmx else 400)


# --- completion: suggested values for a prompt's or a template's argument as the person types ------
MAX_COMPLETION_VALUE_CHARS = 500
SHOWN_COMPLETIONS = 100  # what the spec lets a server send at most


def _completion_attrs(server: McpServer, input_id: str, ref_type: str, argument: str) -> dict[str, str]:
    """What makes an argument's input ask the server for completions as the person types: its form
    is sent (the other arguments are the context) and the answer fills the input's datalist."""
    return {
        "list": f"{input_id}-options", "autocomplete": "off",
        "hx-post": reverse("mcp_servers:completion", args=[server.pk]), "hx-trigger": "focus, input changed delay:200ms",
        "hx-target": f"#{input_id}-options", "hx-swap": "innerHTML", "hx-include": "closest form",
        "hx-vals": json.dumps({"ref_type": ref_type, "argument": argument}),
    }


@admin_only
@require_POST
def completion(request: HttpRequest, pk: int) -> HttpResponse:
    """`completion/complete` for the argument being typed: the prompt's form (`name`, `parg__*`) or the
    template's form (`template`, `var__*`) is sent whole, the other filled arguments as context. The
    answer is the `<option>`s of the field's datalist; not kept in the history (one per keystroke)."""
    server = get_object_or_404(McpServer, pk=pk)
    ref_type = request.POST.get("ref_type", "")
    argument = request.POST.get("argument", "")
    if ref_type == "prompt":
        ref: Any = PromptReference(type="ref/prompt", name=request.POST.get("name", ""))
        prefix = PromptArgumentsForm.PREFIX
    elif ref_type == "template":
        ref = ResourceTemplateReference(type="ref/resource", uri=request.POST.get("template", ""))
        prefix = "var__"
    else:
        return HttpResponseBadRequest("ref_type must be prompt or template.")
    filled = {key.removeprefix(prefix): value for key, value in request.POST.items() if key.startswith(prefix)}
    value = filled.pop(argument, None)
    if not argument or value is None or len(value) > MAX_COMPLETION_VALUE_CHARS or not (getattr(ref, "name", "") or getattr(ref, "uri", "")):
        return HttpResponseBadRequest("Send the form with the argument being typed.")
    context_arguments = {name: text for name, text in filled.items() if text}

    async def complete(connection: McpConnection) -> dict[str, Any]:
        if not connection.capabilities["completions"]:
            return {"values": [], "unsupported": True}
        return await connection.complete(ref, argument, value, context_arguments)

    answer: dict[str, Any] = {"values": []}
    error = ""
    if server.enabled:
        try:
            answer = workbench_pool().run(server.pk, ServerConfig.from_server(server), complete, timeout=10)
        except McpConnectionError as exc:
            error = scrub_for(server, str(exc))
        except MCPError as exc:
            error = scrub_for(server, f"the server answered with error {exc.code}: {exc}")
    values = [str(v) for v in answer.get("values") or []][:SHOWN_COMPLETIONS]
    return render(request, "mcp_servers/_completions.html",
                  {"values": values, "error": error, "unsupported": answer.get("unsupported", False), "argument": argument,
                   "has_more": bool(answer.get("hasMore")), "total": answer.get("total")})


# --- log level: the least level of the log messages the server sends ----------------------------
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@admin_only
@require_POST
def server_log_level(request: HttpRequest, pk: int) -> HttpResponse:
    """`logging/setLevel` on the workbench's session; the messages the server then sends arrive in
    the server log as `log:<level>` lines."""
    server = get_object_or_404(McpServer, pk=pk)
    level = request.POST.get("level", "")
    if level not in LOG_LEVELS:
        return HttpResponseBadRequest(f"level must be one of {', '.join(LOG_LEVELS)}.")

    async def set_level(connection: McpConnection) -> bool:
        if not connection.capabilities["logging"]:
            return False
        await connection.set_logging_level(level)
        return True

    context = _workbench(request, server, kind=McpCallRecord.Kind.SET_LEVEL, name="logging/setLevel", arguments={"level": level},
                         operation=set_level, summary=lambda done: f"level {level}" if done else "the server offers no log levels")
    context["level"] = level
    return render(request, "mcp_servers/_log_level.html", context)


# --- re-run a call from the history ----------------------------------------------------------------
RERUN_TIMEOUT = 30.0


@admin_only
@require_POST
def history_rerun(request: HttpRequest, pk: int, call_pk: int) -> HttpResponse:
    """Make a kept call again with the arguments it was kept with: a tool call, a resource read or a
    prompt. Values the history keeps masked (a secret, a URI's path key) cannot be sent again."""
    server = get_object_or_404(McpServer, pk=pk)
    record = get_object_or_404(server.call_records.all(), pk=call_pk)
    arguments = record.arguments if isinstance(record.arguments, dict) else {}
    context: dict[str, Any] = {"server": server, "record": record}
    if record.kind not in (McpCallRecord.Kind.TOOL, McpCallRecord.Kind.RESOURCE, McpCallRecord.Kind.PROMPT):
        return HttpResponseBadRequest("Only tool calls, resource reads and prompts can be re-run.")
    if "scrubbed" in arguments or SECRET_MASK in json.dumps(arguments) or SECRET_MASK in record.name:
        context["refusal"] = "The history keeps this call's arguments masked (they held what looks like a secret): make it again from its form."
        return render(request, "mcp_servers/_rerun_result.html", context)
    if record.kind == McpCallRecord.Kind.RESOURCE:
        return _read_resource(request, server, str(arguments.get("uri") or record.name), template=str(arguments.get("template") or ""))
    if record.kind == McpCallRecord.Kind.PROMPT:
        prompt_arguments = {str(k): str(v) for k, v in arguments.items()}

        async def get(connection: McpConnection) -> dict[str, Any]:
            return await connection.get_prompt(record.name, prompt_arguments)

        context.update(_workbench(request, server, kind=McpCallRecord.Kind.PROMPT, name=record.name, arguments=prompt_arguments,
                                  operation=get))
        context.update(name=record.name, form=None,
                       result_json=json.dumps(context["value"], indent=2, ensure_ascii=False) if context["value"] else "")
        return render(request, "mcp_servers/_prompt_result.html", context)
    tool = server.tools.filter(name=record.name).first()
    if tool is None:
        context["refusal"] = f"{record.name} is no longer one of this server's tools (a sync removed it)."
        return render(request, "mcp_servers/_rerun_result.html", context)
    call = workbench_calls.start(server, tool, arguments, timeout=RERUN_TIMEOUT, user=request.user, pool=workbench_pool())
    finished = workbench_calls.wait(call)
    context["tool"] = tool
    if finished is None:
        context["waiting"] = True
    else:
        context.update(finished)
    return render(request, "mcp_servers/_rerun_result.html", context)


# --- config files: export a server as an mcp.json entry, import a Claude Desktop / .mcp.json file --
@admin_only
@require_safe
def server_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The server as an `mcp.json` entry (env and header values as `${NAME}` placeholders)."""
    server = get_object_or_404(McpServer, pk=pk)
    response = HttpResponse(json.dumps(config_files.export_entry(server), indent=2, ensure_ascii=False) + "\n",
                            content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{server.name}.mcp.json"'
    return response


@admin_only
def server_import(request: HttpRequest) -> HttpResponse:
    """Servers from an uploaded Claude Desktop config or `.mcp.json` (or pasted JSON): each entry
    becomes a server whose first sync is queued; the page says what was created and what was not, and why."""
    context: dict[str, Any] = {}
    if request.method == "POST":
        upload = request.FILES.get("config")
        data = upload.read(config_files.MAX_FILE_BYTES + 1) if upload else request.POST.get("config_text", "").encode()
        try:
            if not data:
                raise config_files.ConfigFileError("choose a config file or paste its JSON")
            servers = config_files.read_config(data)
            with transaction.atomic():
                outcome = config_files.import_servers(servers)
                for server in outcome.created:
                    services.request_sync(server)
            context["outcome"] = outcome
        except config_files.ConfigFileError as exc:
            context["error"] = str(exc)
    status = 400 if context.get("error") else 200
    return render(request, "mcp_servers/server_import.html", context, status=status)
