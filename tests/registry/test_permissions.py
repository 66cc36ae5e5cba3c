from __future__ import annotations

import pytest
from django.urls import reverse

from playground.registry.models import PermissionChange, PermissionRule

pytestmark = pytest.mark.django_db
PAGE = reverse("registry:permissions")
HTMX = {"HX-Request": "true"}


def test_it_requires_login(client):
    response = client.get(PAGE)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_viewers_are_refused_everything(viewer_client, deny_delete_rule):
    assert viewer_client.get(PAGE).status_code == 403
    assert viewer_client.post(reverse("registry:rule_create"), {"effect": "deny", "pattern": "Write"}).status_code == 403
    assert viewer_client.post(reverse("registry:rule_delete", args=[deny_delete_rule.pk])).status_code == 403
    assert viewer_client.post(reverse("registry:rule_edit", args=[deny_delete_rule.pk]),
                              {"effect": "allow", "pattern": "mcp__github__delete_repo"}).status_code == 403
    assert PermissionRule.objects.get().effect == "deny"
    assert not PermissionChange.objects.exists()


def test_staff_sees_rules_tester_history_and_preview(admin_client, deny_delete_rule):
    body = admin_client.get(PAGE).content.decode()
    assert f'data-rule-id="{deny_delete_rule.pk}"' in body
    assert 'data-testid="permission-tester"' in body
    assert 'data-testid="permission-history"' in body
    assert 'data-testid="permissions-preview"' in body and 'hx-trigger="load, rulesChanged from:body"' in body


def test_adding_a_rule_with_htmx_records_the_change(admin_client, admin_user, profile):
    response = admin_client.post(reverse("registry:rule_create"),
                                 {"effect": "ask", "pattern": "mcp__github__*", "profile": profile.pk, "note": "check"},
                                 headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "rulesChanged"
    rule = PermissionRule.objects.get()
    assert (rule.effect, rule.pattern, rule.profile, rule.changed_by) == ("ask", "mcp__github__*", profile, admin_user)
    body = response.content.decode()
    assert 'hx-swap-oob="beforeend:#rules-body"' in body and f'data-rule-id="{rule.pk}"' in body
    change = PermissionChange.objects.get()
    assert change.action == "create" and change.before is None and change.changed_by == admin_user
    assert change.after == {"effect": "ask", "pattern": "mcp__github__*", "profile": profile.name, "note": "check"}


@pytest.mark.parametrize("pattern", ["mcp__github__cre*", "bad name", "*", "mcp__"])
def test_invalid_patterns_are_refused_with_the_reason(admin_client, pattern):
    response = admin_client.post(reverse("registry:rule_create"), {"effect": "deny", "pattern": pattern}, headers=HTMX)
    body = response.content.decode()
    assert 'data-testid="field-error" data-field="pattern"' in body
    assert 'data-state="invalid"' in body
    assert not PermissionRule.objects.exists() and not PermissionChange.objects.exists()


def test_editing_records_before_and_after(admin_client, deny_delete_rule):
    url = reverse("registry:rule_edit", args=[deny_delete_rule.pk])
    assert 'data-testid="rule-edit-row"' in admin_client.get(url, headers=HTMX).content.decode()
    response = admin_client.post(url, {"effect": "ask", "pattern": "mcp__github__delete_repo", "note": "dangerous"}, headers=HTMX)
    assert response["HX-Trigger"] == "rulesChanged"
    assert 'data-effect="ask"' in response.content.decode()
    change = PermissionChange.objects.get()
    assert change.action == "update"
    assert change.before["effect"] == "deny" and change.after["effect"] == "ask"


def test_saving_without_changes_records_nothing(admin_client, deny_delete_rule):
    admin_client.post(reverse("registry:rule_edit", args=[deny_delete_rule.pk]),
                      {"effect": "deny", "pattern": "mcp__github__delete_repo", "note": "dangerous"}, headers=HTMX)
    assert not PermissionChange.objects.exists()


def test_deleting_records_the_rule_as_it_was(admin_client, deny_delete_rule):
    rule_id = deny_delete_rule.pk
    response = admin_client.post(reverse("registry:rule_delete", args=[rule_id]), headers=HTMX)
    assert response.status_code == 200 and response.content == b""
    assert response["HX-Trigger"] == "rulesChanged"
    assert not PermissionRule.objects.exists()
    change = PermissionChange.objects.get()
    assert (change.action, change.rule_id, change.after) == ("delete", rule_id, None)
    assert change.before["pattern"] == "mcp__github__delete_repo"


def test_history_lists_changes_newest_first(admin_client, profile):
    admin_client.post(reverse("registry:rule_create"), {"effect": "deny", "pattern": "Write"}, headers=HTMX)
    rule = PermissionRule.objects.get()
    admin_client.post(reverse("registry:rule_delete", args=[rule.pk]), headers=HTMX)
    body = admin_client.get(reverse("registry:permission_history"), headers=HTMX).content.decode()
    assert body.index('data-action="delete"') < body.index('data-action="create"')


def test_the_tester_names_the_deciding_rule(admin_client, tools, profile, deny_delete_rule):
    ask = PermissionRule.objects.create(effect="ask", pattern="mcp__github", profile=profile)
    url = reverse("registry:permission_test")
    response = admin_client.get(url, {"tool": "mcp__github__delete_repo", "profile": profile.pk}, headers=HTMX)
    body = response.content.decode()
    assert 'data-effect="deny"' in body and f'data-rule-id="{deny_delete_rule.pk}"' in body
    response = admin_client.get(url, {"tool": "mcp__github__list_issues", "profile": profile.pk}, headers=HTMX)
    assert 'data-effect="ask"' in response.content.decode() and f'data-rule-id="{ask.pk}"' in response.content.decode()
    response = admin_client.get(url, {"tool": "mcp__github__list_issues"}, headers=HTMX)
    assert 'data-effect="allow"' in response.content.decode()
    assert "no rule names it" in response.content.decode()


def test_the_preview_follows_a_rule_change(admin_client, tools):
    preview = reverse("registry:model_view")
    before = admin_client.get(preview, {"mode": "false"}, headers=HTMX).context["preview"].plan
    assert "mcp__slack__post_message" in [t["name"] for t in before.tools]
    admin_client.post(reverse("registry:rule_create"), {"effect": "deny", "pattern": "mcp__slack"}, headers=HTMX)
    after = admin_client.get(preview, {"mode": "false"}, headers=HTMX).context["preview"].plan
    assert "mcp__slack__post_message" not in [t["name"] for t in after.tools]
