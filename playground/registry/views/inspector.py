"""The ToolSearch inspector and "what the model sees"."""
from __future__ import annotations

import re

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from playground.access import EDITOR, VIEWER, has_role, role_required
from playground.engine.server_search import SERVER_STYLE
from playground.engine.toolsearch_tool import CLIENT_STYLE, NATIVE_STYLE
from playground.registry import adapter, ports, previews
from playground.registry.models import AgentProfile

WIRE_STYLES = [("", "profile's"), (NATIVE_STYLE, "native (tool_reference)"), (CLIENT_STYLE, "client-side (text)")]
# The model view can also show Anthropic's server-side search request (the inspector runs our ToolSearch only).
MODEL_VIEW_WIRE_STYLES = [*WIRE_STYLES, (SERVER_STYLE, "server-side search (Anthropic)")]
MODES = ["", "true", "false", "auto", "auto:5", "auto:10", "auto:25"]
# Backends only editors may pick on the page: `naive` rescans every tool for every term (the
# benchmark baseline); the engine CLI still offers it.
STAFF_BACKENDS = frozenset({"naive"})


def _backend_names(user) -> list[str]:
    return [name for name in adapter.backend_names() if has_role(user, EDITOR) or name not in STAFF_BACKENDS]


def _profile(request, params=None) -> AgentProfile | None:
    pk = (request.GET if params is None else params).get("profile") or ""
    if not pk.isdigit():
        return None
    return AgentProfile.objects.filter(pk=int(pk)).first()


def _int(value: str | None, default: int | None, low: int = 1, high: int = 50) -> int | None:
    try:
        return max(low, min(high, int(value))) if value else default
    except ValueError:
        return default


@role_required(VIEWER)
@require_http_methods(["GET", "HEAD", "POST"])
def inspector(request):
    """A search changes nothing, so POST is the same as GET for everyone: it carries a query too
    long for a URL (a select: list of hundreds of names)."""
    params = request.POST if request.method == "POST" else request.GET
    profile = _profile(request, params)
    backend = params.get("backend", "")
    query = params.get("q", "")
    try:
        if backend and backend not in adapter.backend_names():
            raise ValueError(f"unknown backend {backend!r} (backends: {', '.join(_backend_names(request.user))})")
        if backend in STAFF_BACKENDS and not has_role(request.user, EDITOR):
            raise ValueError(f"the {backend!r} backend is for editors on this page (it stays available in the engine CLI)")
        answer = _inspect(params, query, profile, backend)
    except ValueError as exc:  # bad settings, or a profile the engine cannot run (an unknown wire style or backend)
        answer = previews.InspectorAnswer(query=query, backend=backend, wire_style="", max_results=0, error=str(exc))
    context = {"answer": answer, "profile": profile}
    if request.htmx:
        return render(request, "registry/_inspector_results.html", context)  # htmx swaps only 2xx answers
    context.update(
        profiles=AgentProfile.objects.all(),
        backends=_backend_names(request.user),
        wire_styles=WIRE_STYLES,
        modes=MODES,
        params=params,
    )
    return render(request, "registry/inspector.html", context, status=400 if answer.error else 200)


def _inspect(params, query: str, profile: AgentProfile | None, backend: str) -> previews.InspectorAnswer:
    return previews.inspect_query(
        query,
        profile,
        backend=backend,
        max_results=_int(params.get("max_results"), None),
        wire_style=params.get("wire_style", "") if params.get("wire_style") in dict(WIRE_STYLES) else "",
        mode=params.get("mode", "") if params.get("mode") in MODES else "",
        backend_settings=params.get("settings", ""),
    )


@role_required(EDITOR)
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


@role_required(VIEWER)
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
