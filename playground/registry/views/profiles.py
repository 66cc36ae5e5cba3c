"""Agent profiles: list, create, edit, and the resolved tool set of one profile."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Count
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from playground.access import EDITOR, VIEWER, role_required
from playground.registry import adapter, ports, previews
from playground.registry.forms import AgentProfileForm
from playground.registry.models import AgentProfile
from playground.registry.views.form_pages import form_page


@role_required(VIEWER)
@require_safe
def profile_list(request):
    profiles = AgentProfile.objects.annotate(rule_count=Count("rules"))
    return render(request, "registry/profile_list.html", {"profiles": profiles})


@role_required(VIEWER)
@require_safe
def profile_detail(request, pk: int):
    profile = get_object_or_404(AgentProfile, pk=pk)
    catalog = adapter.engine_catalog()
    narrowed, filtered = adapter.filtered_catalog(profile)
    removed_by_profile = [tool.name for tool in catalog if tool.name not in narrowed]
    error = ""
    preview = settings_obj = resolved = None
    try:
        resolved = previews.profile_settings(profile)
        settings_obj = resolved.agent
        preview = previews.model_preview(profile)
    except ValueError as exc:  # settings the engine cannot run: shown, not a server error
        error = str(exc)
    context = {
        "profile": profile,
        "settings_obj": settings_obj,
        "wire_style_label": resolved.wire_style_label if resolved else profile.wire_style,
        "predicts_tools": resolved.predicts_tools if resolved else False,
        "provider_label": ports.providers().provider_label(profile.provider),
        "catalog_count": len(catalog),
        "narrowed_count": len(narrowed),
        "removed_by_profile": removed_by_profile,
        "denylist": settings.AGENT_TOOL_DENYLIST,
        "filtered": filtered,
        "permitted_count": len(filtered.permitted),
        "preview": preview,
        "error": error,
        "rules": profile.rules.all(),
    }
    return render(request, "registry/profile_detail.html", context)


@role_required(EDITOR)
def profile_create(request):
    return form_page(request, AgentProfileForm(request.POST or None), "registry/profile_form.html", {"profile": None},
                     detail="registry:profile_detail", saved=lambda profile: f"Created profile {profile.name}.")


@role_required(EDITOR)
def profile_edit(request, pk: int):
    profile = get_object_or_404(AgentProfile, pk=pk)
    return form_page(request, AgentProfileForm(request.POST or None, instance=profile), "registry/profile_form.html",
                     {"profile": profile}, detail="registry:profile_detail", saved=lambda row: f"Saved profile {row.name}.")
