"""Permissions editor (editors only): rules inline with htmx, a tester, history, live preview."""
from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from playground.access import EDITOR, role_required
from playground.engine.claude_settings import SettingsFormatError
from playground.registry import adapter, services, settings_files
from playground.registry.forms import PermissionRuleForm, PermissionTestForm, SettingsImportForm
from playground.registry.models import AgentProfile, PermissionChange, PermissionRule

HISTORY_SIZE = 50
RULES_CHANGED = "rulesChanged"  # htmx event: the history and the preview refresh on it


def _rules():
    return PermissionRule.objects.select_related("profile", "changed_by").order_by("profile__name", "pattern", "id")


def _history():
    return PermissionChange.objects.select_related("changed_by")[:HISTORY_SIZE]


def _changed(response: HttpResponse) -> HttpResponse:
    response["HX-Trigger"] = RULES_CHANGED
    return response


@role_required(EDITOR)
@require_safe
def permissions(request):
    profile_pk = request.GET.get("profile", "")
    context = {
        "rules": _rules(),
        "form": PermissionRuleForm(),
        "test_form": PermissionTestForm(),
        "history": _history(),
        "profiles": AgentProfile.objects.all(),
        "preview_profile": profile_pk if profile_pk.isdigit() else "",
    }
    return render(request, "registry/permissions.html", context)


@require_POST
@role_required(EDITOR)
def rule_create(request):
    form = PermissionRuleForm(request.POST)
    if not form.is_valid():
        if request.htmx:
            # htmx swaps only 2xx answers: the form with its errors comes back as 200.
            return render(request, "registry/_rule_form.html", {"form": form})
        messages.error(request, "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect("registry:permissions")
    rule = services.save_rule(form.save(commit=False), user=request.user, before=None)
    if not request.htmx:
        messages.success(request, f"Rule added: {rule}.")
        return redirect("registry:permissions")
    response = render(request, "registry/_rule_created.html", {"rule": rule, "form": PermissionRuleForm()})
    return _changed(response)


def _edit_ids(rule: PermissionRule) -> str:
    # A row being edited sits on the page beside the add form (and other edited rows): ids of its own.
    return f"id_rule{rule.pk}_%s"


@role_required(EDITOR)
def rule_edit(request, pk: int):
    rule = get_object_or_404(PermissionRule.objects.select_related("profile"), pk=pk)
    if request.method == "POST":
        before = services.rule_snapshot(rule)
        form = PermissionRuleForm(request.POST, instance=rule, auto_id=_edit_ids(rule))
        if form.is_valid():
            rule = services.save_rule(form.save(commit=False), user=request.user, before=before)
            if not request.htmx:
                return redirect("registry:permissions")
            return _changed(render(request, "registry/_rule_row.html", {"rule": rule}))
        status = 200 if request.htmx else 400
    else:
        form = PermissionRuleForm(instance=rule, auto_id=_edit_ids(rule))
        status = 200
    return render(request, "registry/_rule_edit_row.html", {"rule": rule, "form": form}, status=status)


@role_required(EDITOR)
@require_safe
def rule_row(request, pk: int):
    rule = get_object_or_404(PermissionRule.objects.select_related("profile", "changed_by"), pk=pk)
    return render(request, "registry/_rule_row.html", {"rule": rule})


@require_POST
@role_required(EDITOR)
def rule_delete(request, pk: int):
    rule = get_object_or_404(PermissionRule.objects.select_related("profile"), pk=pk)
    services.delete_rule(rule, user=request.user)
    if not request.htmx:
        messages.success(request, "Rule deleted.")
        return redirect("registry:permissions")
    return _changed(HttpResponse(""))


@role_required(EDITOR)
@require_safe
def permission_test(request):
    # The box refreshes itself after every rule change (rulesChanged), also while nothing is typed in
    # it: an empty name is "nothing to test yet", not a missing field.
    form = PermissionTestForm(request.GET if request.GET.get("tool", "").strip() else None)
    decision = None
    if form.is_valid():
        profile = form.cleaned_data["profile"]
        decision = adapter.permission_policy(profile).decide(form.cleaned_data["tool"].strip())
    return render(request, "registry/_permission_test.html", {"form": form, "decision": decision})


@role_required(EDITOR)
@require_safe
def permission_history(request):
    return render(request, "registry/_permission_history.html", {"history": _history()})


# -- Claude Code settings in and out (settings_files.py) ---------------------------------------------
@role_required(EDITOR)
@require_http_methods(["GET", "POST"])
def settings_import(request):
    """Paste or upload `.claude/settings.json` (or `settings.local.json`): preview what it adds to a
    profile's rules (or the global ones) and what does not map, then commit."""
    form = SettingsImportForm(request.POST or None, request.FILES or None)
    plan = None
    if request.method == "POST" and form.is_valid():
        text, profile = form.cleaned_data["text"], form.cleaned_data["profile"]
        try:
            if request.POST.get("action") == "commit":
                plan = settings_files.commit_import(text, profile, user=request.user)
                scope = f"the profile {profile.name}" if profile else "the global rules"
                messages.success(request, f"Imported {len(plan.new)} rule{'s' if len(plan.new) != 1 else ''} into {scope}"
                                 + (f"; {len(plan.unmapped)} entr{'ies' if len(plan.unmapped) != 1 else 'y'} did not map." if plan.unmapped else "."))
                return redirect("registry:permissions")
            plan = settings_files.preview_import(text, profile)
            # an uploaded file is not sent again by the browser: commit reads the text shown
            form = SettingsImportForm({"settings_text": text, "profile": profile.pk if profile else ""})
        except SettingsFormatError as exc:
            form.add_error(None, f"Not Claude Code settings: {exc}")
    return render(request, "registry/settings_import.html", {"form": form, "plan": plan})


@role_required(EDITOR)
@require_safe
def settings_export(request):
    """The rules that decide for a profile (global and its own; no profile: the global ones) as `.claude/settings.json`."""
    chosen = request.GET.get("profile", "")
    profile = AgentProfile.objects.filter(pk=int(chosen)).first() if chosen.isdigit() and len(chosen) < 19 else None
    if chosen and profile is None:
        messages.error(request, f"No profile with id {chosen[:20]!r}.")
        return redirect("registry:permissions")
    response = HttpResponse(json.dumps(settings_files.export_rules(profile), indent=2) + "\n", content_type="application/json; charset=utf-8")
    name = f"profile-{profile.pk}" if profile else "global"
    response["Content-Disposition"] = f'attachment; filename="claude-settings-{name}.json"'
    return response
