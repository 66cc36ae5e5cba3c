"""The ToolSearch inspector and "what the model sees"."""
from __future__ import annotations

import re

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.conversations.usage import forget_usage

from playground.registry import adapter, availability, previews
from playground.registry.access import staff_for_writes, staff_only
from playground.registry.models import AgentProfile

WIRE_STYLES = [("", "profile's"), ("native", "native (tool_reference)"), ("client", "client-side (text)")]
# The model view can also show Anthropic's server-side search request (the inspector runs our ToolSearch only).
MODEL_VIEW_WIRE_STYLES = [*WIRE_STYLES, ("server", "server-side search (Anthropic)")]
MODES = ["", "true", "false", "auto", "auto:5", "auto:10", "auto:25"]


def _profile(request) -> AgentProfile | None:
    """The ?profile= asked for; an id that names no profile is an error, not the default settings in disguise."""
    pk = (request.GET.get("profile") or "").strip()
    if not pk:
        return None
    profile = AgentProfile.objects.filter(pk=int(pk)).first() if pk.isdigit() else None
    if profile is None:
        raise ValueError(f"unknown profile {pk[:40]!r}: no profile has that id (choose one from the list)")
    return profile


def _int(value: str | None, default: int | None, low: int = 1, high: int = 50, name: str = "max_results") -> int | None:
    """A number from the query string; out of range or not a number is an error (clamping hid the mistake)."""
    if value is None or not value.strip():
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high}, not {value[:20]!r}")
    return number


@staff_for_writes
@require_safe
def inspector(request):
    profile = None
    backend = request.GET.get("backend", "")
    query = request.GET.get("q", "")
    try:
        profile = _profile(request)
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
        # (name, why it cannot run here): postgres without PostgreSQL is shown disabled with the fix.
        backends=[(name, availability.backend_unavailable(name)) for name in adapter.backend_names()],
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
        wire_style=request.GET.get("wire_style", "") if request.GET.get("wire_style") in ("native", "client") else "",
        mode=request.GET.get("mode", "") if request.GET.get("mode") in MODES else "",
        backend_settings=request.GET.get("settings", ""),
    )


@staff_only
@require_POST
def usage_forget(request):
    """Forget everything learned from usage (the past searches behind each tool's "usage" field)."""
    deleted = forget_usage()
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
    discovered = parse_names(" ".join(request.GET.getlist("discovered")))
    mode = request.GET.get("mode", "")
    wire_style = request.GET.get("wire_style", "")
    error = ""
    preview = None
    profile = None
    try:
        profile = _profile(request)
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
