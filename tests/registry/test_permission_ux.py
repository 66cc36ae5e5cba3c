"""Permissions page details a new user tripped over: duplicate rules, a doubled element id, the tester's unknown tools."""
from __future__ import annotations

import re
from collections import Counter

import pytest
from django.urls import reverse

from playground.registry.models import PermissionChange, PermissionRule

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def test_an_identical_rule_is_refused_with_a_clear_error(admin_client, profile):
    PermissionRule.objects.create(effect="ask", pattern="mcp__github__*", profile=profile)
    response = admin_client.post(reverse("registry:rule_create"),
                                 {"effect": "ask", "pattern": "mcp__github__*", "profile": profile.pk}, headers=HTMX)
    body = response.content.decode()
    assert 'data-testid="form-error"' in body and "This rule already exists: ask mcp__github__* (profile " in body
    assert 'data-state="invalid"' in body
    assert PermissionRule.objects.count() == 1 and not PermissionChange.objects.exists()
    # the same pattern with another effect or scope is a different rule
    assert admin_client.post(reverse("registry:rule_create"), {"effect": "deny", "pattern": "mcp__github__*", "profile": profile.pk},
                             headers=HTMX)["HX-Trigger"] == "rulesChanged"
    assert admin_client.post(reverse("registry:rule_create"), {"effect": "ask", "pattern": "mcp__github__*"},
                             headers=HTMX)["HX-Trigger"] == "rulesChanged"
    assert PermissionRule.objects.count() == 3


def test_editing_a_rule_into_a_copy_of_another_is_refused_but_saving_it_unchanged_is_not(admin_client):
    PermissionRule.objects.create(effect="deny", pattern="Write")
    other = PermissionRule.objects.create(effect="deny", pattern="Bash")
    url = reverse("registry:rule_edit", args=[other.pk])
    body = admin_client.post(url, {"effect": "deny", "pattern": "Write"}, headers=HTMX).content.decode()
    assert "This rule already exists: deny Write (global)." in body
    assert admin_client.post(url, {"effect": "deny", "pattern": "Bash"}, headers=HTMX).status_code == 200
    assert PermissionRule.objects.get(pk=other.pk).pattern == "Bash"


def test_element_ids_on_the_permissions_page_are_unique(admin_client):
    body = admin_client.get(reverse("registry:permissions")).content.decode()
    ids = Counter(re.findall(r'\sid="([^"]+)"', body))
    assert [i for i, n in ids.items() if n > 1] == []


def test_a_rule_being_edited_has_ids_of_its_own(admin_client):
    rule = PermissionRule.objects.create(effect="deny", pattern="Write")
    body = admin_client.get(reverse("registry:rule_edit", args=[rule.pk]), headers=HTMX).content.decode()
    assert f'id="id_rule{rule.pk}_profile"' in body and 'id="id_profile"' not in body


def test_the_tester_names_an_unknown_tool_instead_of_answering_allow(admin_client):
    from tests.registry.conftest import make_tool

    make_tool("mcp__github__create_issue", "Create an issue")
    url = reverse("registry:permission_test")
    typo = admin_client.get(url, {"tool": "mcp__github__create_isue"}).content.decode()
    assert "No tool named &#x27;mcp__github__create_isue&#x27; in the registry" in typo and "allow" not in typo.lower().split("no tool")[0]
    known = admin_client.get(url, {"tool": "mcp__github__create_issue"}).content.decode()
    assert "No tool named" not in known and "allow" in known.lower()


def test_the_tester_refreshed_after_a_rule_change_with_nothing_typed_shows_no_error(admin_client):
    # Before: adding a rule refreshed the empty tester (rulesChanged, with hx-include of its empty
    # form) and it said "This field is required.".
    url = reverse("registry:permission_test")
    body = admin_client.get(url, {"tool": "", "profile": ""}, headers=HTMX).content.decode()
    assert "This field is required" not in body and 'data-testid="permission-decision"' not in body
    from tests.registry.conftest import make_tool

    make_tool("mcp__github__create_issue", "Create an issue")
    typed = admin_client.get(url, {"tool": "mcp__github__create_issue", "profile": ""}, headers=HTMX).content.decode()
    assert 'data-testid="permission-decision"' in typed
