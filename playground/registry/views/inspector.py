"""The ToolSearch inspector and "what the model sees"."""
from __future__ import annotations

import re

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from playground.access import EDITOR, VIEWER, has_role, role_required
from playground.engine.wires.registry import wire_styles
from playground.engine.wires.vendors import ANTHROPIC
from playground.registry import availability, backends, ports, previews
from playground.registry.models import AgentProfile

# The inspector runs our ToolSearch as Anthropic's styles answer it; the model view shows every style's request.
WIRE_STYLES = [("", "profile's"), *((s.name, s.short_label or s.label) for s in wire_styles()
                                    if s.vendor == ANTHROPIC and not s.searches_on_server)]
MODEL_VIEW_WIRE_STYLES = [*WIRE_STYLES, *((s.name, s.short_label or s.label) for s in wire_styles() if s.name not in dict(WIRE_STYLES))]
MODES = ["", "true", "false", "auto", "auto:5", "auto:10", "auto:25"]
# Backends only editors may pick on the page: `naive` rescans every tool for every term (the
# benchmark baseline); the engine CLI still offers it.
STAFF_BACKENDS = frozenset({"naive"})


def _backend_names(user) -> list[str]:
    return [name for name in backends.backend_names() if has_role(user, EDITOR) or name not in STAFF_BACKENDS]


def _refusal(name: str, user) -> str:
    """Why the page will not run backend `name` for this user ("" = it runs): the limits the single
    view enforces, for a compared backend's column."""
    if name not in backends.backend_names():
        return f"unknown backend {name[:40]!r}"
    if name in STAFF_BACKENDS and not has_role(user, EDITOR):
        return f"the {name!r} backend is for editors on this page (it stays available in the engine CLI)"
    unavailable = availability.backend_unavailable(name)
    return f"{name} is unavailable here: {unavailable}" if unavailable else ""


def _profile(request, params=None) -> AgentProfile | None:
    """The ?profile= asked for; an id that names no profile is an error, not the default settings in disguise."""
    pk = ((request.GET if params is None else params).get("profile") or "").strip()
    if not pk:
        return None
    profile = AgentProfile.objects.filter(pk=int(pk)).first() if pk.isdigit() and len(pk) <= 18 else None
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


@role_required(VIEWER)
@require_http_methods(["GET", "HEAD", "POST"])
def inspector(request):
    """A search changes nothing, so POST is the same as GET for everyone: it carries a query too
    long for a URL (a select: list of hundreds of names)."""
    params = request.POST if request.method == "POST" else request.GET
    profile = None
    backend = params.get("backend", "")
    query = params.get("q", "")
    try:
        profile = _profile(request, params)
        if backend and backend not in backends.backend_names():
            raise ValueError(f"unknown backend {backend!r} (backends: {', '.join(_backend_names(request.user))})")
        if backend in STAFF_BACKENDS and not has_role(request.user, EDITOR):
            raise ValueError(f"the {backend!r} backend is for editors on this page (it stays available in the engine CLI)")
        answer = _inspect(params, query, profile, backend, request.user)
    except ValueError as exc:  # bad settings, or a profile the engine cannot run (an unknown wire style or backend)
        answer = previews.InspectorAnswer(query=query, backend=backend, wire_style="", max_results=0, error=str(exc))
    context = {"answer": answer, "profile": profile}
    if request.htmx:
        return render(request, "registry/_inspector_results.html", context)  # htmx swaps only 2xx answers
    context.update(
        profiles=AgentProfile.objects.all(),
        # (name, why it cannot run here): postgres without PostgreSQL is shown disabled with the fix.
        backends=[(name, availability.backend_unavailable(name)) for name in _backend_names(request.user)],
        wire_styles=WIRE_STYLES,
        modes=MODES,
        params=params,
        compared=params.getlist("compare"),
    )
    return render(request, "registry/inspector.html", context, status=400 if answer.error else 200)


def _choice(params, name: str, choices: list[str]) -> str:
    """A select's value from the query string; one the page never offers is an error, not silently the default."""
    value = params.get(name, "")
    if value not in choices:
        raise ValueError(f"unknown {name.replace('_', ' ')} {value[:40]!r} (choose one of: {', '.join(c for c in choices if c)})")
    return value


def _inspect(params, query: str, profile: AgentProfile | None, backend: str, user) -> previews.InspectorAnswer:
    compare = params.getlist("compare")
    if len(compare) > len(backends.backend_names()):
        raise ValueError(f"compare at most {len(backends.backend_names())} backends, not {len(compare)}")
    return previews.inspect_query(
        query,
        profile,
        backend=backend,
        max_results=_int(params.get("max_results"), None),
        wire_style=_choice(params, "wire_style", list(dict(WIRE_STYLES))),
        mode=_choice(params, "mode", MODES),
        backend_settings=params.get("settings", ""),
        compare=[(name, _refusal(name, user)) for name in compare],
        rank_gap=_int(params.get("rank_gap"), previews.RANK_GAP, low=0, high=49, name="rank_gap"),
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
    discovered = parse_names(" ".join(request.GET.getlist("discovered")))
    error = ""
    preview = None
    profile = None
    try:
        profile = _profile(request)
        preview = previews.model_preview(
            profile,
            discovered,
            mode=_choice(request.GET, "mode", MODES),
            wire_style=_choice(request.GET, "wire_style", list(dict(MODEL_VIEW_WIRE_STYLES))),
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
