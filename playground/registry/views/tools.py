"""Tool pages: list with filters and bulk actions, detail, create, edit."""
from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, EDITOR, VIEWER, has_role, role_required
from playground.engine.tools import ToolDefinitionError
from playground.registry import adapter, index_builds, indexing, ports, selectors, services
from playground.registry.forms import BulkToolActionForm, ToolForm
from playground.registry.models import Tool
from playground.registry.views.form_pages import form_page

PAGE_SIZE = 50
FILTER_PARAMS = ("q", "deferred", "always_load", "enabled", "server", "source")


def _filter_query(request) -> str:
    return urlencode({k: request.GET[k] for k in FILTER_PARAMS if request.GET.get(k)})


@role_required(VIEWER)
@require_safe
def tool_list(request):
    tools = selectors.filter_tools(request.GET)
    totals = selectors.tool_totals(tools)
    paginator = Paginator(tools.defer("input_schema"), PAGE_SIZE)
    paginator.count = totals["count"]  # already counted with the token total: one scan, not two
    page = paginator.get_page(request.GET.get("page"))
    policy = adapter.permission_policy()
    for tool in page.object_list:
        tool.global_decision = policy.decide(tool.name)  # only this page's rows: one rules query
    context = {
        "page": page,
        "totals": totals,
        "all_totals": selectors.tool_totals(Tool.objects.filter(enabled=True)),
        **_server_options(request.GET.get("server", "")),
        "sources": Tool.Source.choices,
        "filters": {k: request.GET.get(k, "") for k in FILTER_PARAMS},
        "filter_query": _filter_query(request),
        "bulk_actions": BulkToolActionForm.ACTIONS,
        **_index_context(),
    }
    template = "registry/_tool_table.html" if request.htmx and request.htmx.target == "tool-table" else "registry/tool_list.html"
    return render(request, template, context)


def _server_options(chosen: str) -> dict:
    """The server filter's suggestions: the first servers by name (a catalog may have thousands;
    typing fetches others from `tool_servers`), with the chosen one kept."""
    names, more = selectors.server_names()
    return {"servers": names, "more_servers": more, "chosen_server": chosen.strip()[: selectors.SERVER_TEXT_MAX]}


@role_required(VIEWER)
@require_safe
def tool_servers(request):
    """Suggestions for the tools page's server filter: servers whose name contains the text typed."""
    names, more = selectors.server_names(request.GET.get("server", ""))
    return render(request, "registry/_server_options.html", {"servers": names, "more_servers": more})


def _index_context() -> dict:
    return {"index_build": index_builds.current_build(), "index_in_background": index_builds.builds_in_background()}


@role_required(VIEWER)
@require_safe
def search_index(request):
    """The search index line of the tools page (htmx polls it while a build runs)."""
    return render(request, "registry/_search_index.html", _index_context())


@require_POST
@role_required(EDITOR)
def tool_bulk(request):
    form = BulkToolActionForm(request.POST)
    back = reverse("registry:tool_list") + ("?" + request.POST["back"] if request.POST.get("back") else "")
    if not form.is_valid():
        messages.error(request, "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect(back)
    count = services.bulk_tool_action(form.cleaned_data["ids"], form.cleaned_data["action"])
    label = dict(BulkToolActionForm.ACTIONS)[form.cleaned_data["action"]]
    messages.success(request, f"{label}: {count} tool(s) updated.")
    return redirect(back)


@role_required(VIEWER)
@require_safe
def tool_detail(request, pk: int):
    tool = get_object_or_404(Tool.objects.select_related("server"), pk=pk)
    verdicts: list = []
    try:
        engine_tool = adapter.tool_to_engine(tool)
        api_definition = json.dumps(engine_tool.to_api(defer_loading=tool.deferred), indent=2, ensure_ascii=False)
        definition_error = ""
        if tool.enabled:
            verdicts = selectors.tool_verdicts(engine_tool)
    except ToolDefinitionError as exc:
        api_definition, definition_error = "", str(exc)
    decision = adapter.permission_policy().decide(tool.name)
    context = {
        "tool": tool,
        "schema_pretty": json.dumps(tool.input_schema, indent=2, ensure_ascii=False),
        "api_definition": api_definition,
        "definition_error": definition_error,
        "global_decision": decision,
        "verdicts": verdicts,
        # A query may quote a person's request: others' conversations only for admins.
        "past_searches": ports.usage().queries_for_tool(tool.name, user=None if has_role(request.user, ADMIN) else request.user),
    }
    return render(request, "registry/tool_detail.html", context)


@role_required(EDITOR)
def tool_create(request):
    form = ToolForm(request.POST or None, initial={"source": Tool.Source.MANUAL})
    return form_page(request, form, "registry/tool_form.html", {"tool": None}, detail="registry:tool_detail",
                     saved=lambda tool: f"Created {tool.name}.", after_save=indexing.request_index_build)


@role_required(EDITOR)
def tool_edit(request, pk: int):
    tool = get_object_or_404(Tool, pk=pk)
    return form_page(request, ToolForm(request.POST or None, instance=tool), "registry/tool_form.html", {"tool": tool},
                     detail="registry:tool_detail", saved=lambda row: f"Saved {row.name}.",
                     after_save=indexing.request_index_build)
