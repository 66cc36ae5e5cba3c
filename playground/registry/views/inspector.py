"""The ToolSearch inspector and "what the model sees"."""
from __future__ import annotations

import re

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.access import staff_for_writes, staff_required
from playground.engine.server_search import SERVER_STYLE
from playground.engine.toolsearch_tool import CLIENT_STYLE, NATIVE_STYLE
from playground.registry import adapter, ports, previews
from playground.registry.models import AgentProfile

WIRE_STYLES = [("", "profile's"), (NATIVE_STYLE, "native (tool_reference)"), (CLIENT_STYLE, "client-side (text)")]
# The model view can also show Anthropic's server-side search request (the inspector runs our ToolSearch only).
MODEL_VIEW_WIRE_STYLES = [*WIRE_STYLES, (SERVER_STYLE, "server-side search (Anthropic)")]
MODES = ["", "true", "false", "auto", "auto:5", "auto:10", "auto:25"]


def _profile(request) -> AgentProfile | None:
    pk = request.GET.get("profile") or ""
    if not pk.isdigit():
        return None
    return AgentProfile.objects.filter(pk=int(pk)).first()


def _int(value: str | None, default: int | None, low: int = 1, high: int = 50) -> int | None:
    try:
        return max(low, min(high, int(value))) if value else default
    except ValueError:
        return default


@staff_for_writes
@require_safe
def inspector(request):
    profile = _profile(request)
    backend = request.GET.get("backend", "")
    query = request.GET.get("q", "")
    try:
        if backend and backend not in adapter.backend_names():
            raise ValueError(f"unknown backend {backend!r} (backends: {', '.join(adapter.backend_names())})")
        answer = _inspect(request, query, profile, backend)
    except ValueError as exc:  # bad settings, or a profile the engine cannot run (an unknown wire style or backend)
        answer = previews.InspectorAnswer(query=query, backend=backend, wire_style="", max_results=0, error=str(exc))
    context = {"answer": answer, "profile": profile}
    if request.htmx:
        return render(request, "registry/_inspector_results.html", context)
    context.update(
        profiles=AgentProfile.objects.all(),
        backends=adapter.backend_names(),
        wire_styles=WIRE_STYLES,
        modes=MODES,
        params=request.GET,
    )
    return render(request, "registry/inspector.html", context)


def _inspect(request, query: str, profile: AgentProfile | None, backend: str) -> previews.InspectorAnswer:
    return previews.inspect_query(
        query,
        profile,
        backend=backend,
        max_results=_int(request.GET.get("max_results"), None),
        wire_style=request.GET.get("wire_style", "") if request.GET.get("wire_style") in dict(WIRE_STYLES) else "",
        mode=request.GET.get("mode", "") if request.GET.get("mode") in MODES else "",
        backend_settings=request.GET.get("settings", ""),
    )


@staff_required
@require_POST
def usage_forget(request):
    """Forget everything learned from usage (the past searches behind each tool's "usage" field)."""
    deleted = ports.usage().forget_usage()
    messages.success(request, f"Forgot {deleted} learned search{'es' if deleted != 1 else ''}; ranking is back to the tools' own text.")
    return redirect(reverse("registry:inspector"))


def parse_names(text: str) -> list[str]:
    names: list[str] = []
    for part in re.split(r"[,\s]+", text or ""):
        if part and part not in names:
            names.append(part)
    return names


@staff_for_writes
@require_safe
def model_view(request):
    profile = _profile(request)
    discovered = parse_names(" ".join(request.GET.getlist("discovered")))
    mode = request.GET.get("mode", "")
    wire_style = request.GET.get("wire_style", "")
    error = ""
    preview = None
    try:
        preview = previews.model_preview(
            profile,
            discovered,
            mode=mode if mode in MODES else "",
            wire_style=wire_style if wire_style in dict(MODEL_VIEW_WIRE_STYLES) else "",
        )
    except ValueError as exc:  # e.g. a mode string the engine rejects
        error = str(exc)
    context = {"preview": preview, "error": error, "profile": profile}
    if request.htmx:
        return render(request, "registry/_model_view.html", context)
    context.update(
        profiles=AgentProfile.objects.all(),
        modes=MODES,
        wire_styles=MODEL_VIEW_WIRE_STYLES,
        params=request.GET,
        discovered_text=", ".join(discovered),
    )
    return render(request, "registry/model_view.html", context)
