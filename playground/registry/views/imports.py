"""Import (preview, then commit in one transaction) and export of tool catalogs."""
from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from playground.access import EDITOR, VIEWER, role_required
from playground.registry import selectors, services
from playground.registry.forms import ImportForm
from playground.registry.models import ToolImport

PREVIEW_ROWS = 200  # per category on the preview page; the counts are always complete


@role_required(EDITOR)
def tool_import(request):
    """GET: the form. POST: parse and stage the catalog, and show the preview (nothing imported yet)."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        staged, preview = services.stage_import(
            form.cleaned_data["payload"],
            filename=form.cleaned_data["filename"],
            server_name=form.cleaned_data.get("server_name") or "",
            user=request.user,
        )
        context = {"staged": staged, "preview": preview, "limit": PREVIEW_ROWS}
        template = "registry/_import_preview.html" if request.htmx else "registry/tool_import.html"
        return render(request, template, {**context, "form": ImportForm()})
    if request.htmx and form.errors:
        # htmx swaps only 2xx answers: the errors come back as 200.
        return render(request, "registry/_import_errors.html", {"form": form})
    status = 400 if form.errors else 200
    recent = ToolImport.objects.select_related("created_by").defer("payload")[:10]
    return render(request, "registry/tool_import.html", {"form": form, "recent": recent}, status=status)


@require_POST
@role_required(EDITOR)
def tool_import_commit(request, pk: int):
    staged = get_object_or_404(ToolImport, pk=pk)
    try:
        summary = services.commit_import(staged)
    except services.ImportRejected as exc:
        messages.error(request, f"Import rejected: {exc}")
        return redirect("registry:tool_import")
    messages.success(
        request,
        f"Imported: {summary['new']} new, {summary['changed']} changed, {summary['unchanged']} unchanged.",
    )
    return redirect("registry:tool_list")


@role_required(VIEWER)
@require_safe
def tool_export(request):
    """`?format=jsonl|anthropic|openai|mcp` plus the list page's filters; no format → the choice page."""
    fmt = request.GET.get("format", "")
    if not fmt:
        return render(request, "registry/tool_export.html", {"formats": services.EXPORT_FORMATS, "query": request.GET.urlencode()})
    if fmt not in services.EXPORT_FORMATS:
        raise Http404(f"unknown export format {fmt!r}")
    _label, content_type, extension = services.EXPORT_FORMATS[fmt]
    tools = selectors.filter_tools(request.GET).order_by("name")
    response = HttpResponse(services.export_tools(tools, fmt), content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="tools-{fmt}.{extension}"'
    return response
