"""Claude Code's `.claude/settings.json`: previewed, then imported into a profile's or the global
rules (in the change history), what does not map listed; a profile's deciding rules exported."""
from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from playground.engine.claude_settings import read_permission_settings
from playground.registry import adapter
from playground.registry.models import AgentProfile, PermissionChange, PermissionRule

pytestmark = pytest.mark.django_db
IMPORT = reverse("registry:settings_import")
SETTINGS = json.dumps({"permissions": {"allow": ["mcp__github"], "ask": ["mcp__github__push_files", "Write(*)"],
                                       "deny": ["mcp__slack__*", "Bash(rm -rf:*)"]}})


@pytest.fixture
def profile():
    return AgentProfile.objects.create(name="team", tool_search_mode="true")


def test_preview_saves_nothing_then_commit_adds_the_rules_with_history(admin_client, profile):
    PermissionRule.objects.create(effect="allow", pattern="mcp__github", profile=profile)
    upload = SimpleUploadedFile("settings.json", SETTINGS.encode(), content_type="application/json")
    preview = admin_client.post(IMPORT, {"settings_file": upload, "profile": profile.pk, "action": "preview"})
    page = preview.content.decode()
    assert 'data-new="3" data-present="1" data-unmapped="1"' in page and PermissionRule.objects.count() == 1
    assert "Bash only for “rm -rf:*”" in page
    assert SETTINGS.replace('"', "&quot;") in page  # the uploaded text is carried into the form the commit sends

    committed = admin_client.post(IMPORT, {"settings_text": SETTINGS, "profile": profile.pk, "action": "commit"}, follow=True)
    assert "Imported 3 rules into the profile team; 1 entry did not map." in committed.content.decode()
    rules = set(PermissionRule.objects.filter(profile=profile).values_list("effect", "pattern"))
    assert rules == {("allow", "mcp__github"), ("ask", "mcp__github__push_files"), ("ask", "Write"), ("deny", "mcp__slack__*")}
    assert PermissionChange.objects.filter(action="create").count() == 3
    assert set(PermissionRule.objects.filter(profile=profile, note="imported from Claude Code settings").values_list("pattern", flat=True)) == {
        "mcp__github__push_files", "Write", "mcp__slack__*"}
    # the imported rules decide as any rule does
    assert adapter.permission_policy(profile).decide("mcp__slack__post_message").effect == "deny"


def test_export_holds_the_global_and_the_profiles_rules_and_reads_back(admin_client, profile):
    other = AgentProfile.objects.create(name="other")
    PermissionRule.objects.create(effect="deny", pattern="mcp__slack", profile=None)
    PermissionRule.objects.create(effect="ask", pattern="Write", profile=profile)
    PermissionRule.objects.create(effect="allow", pattern="Read", profile=other)
    exported = admin_client.get(reverse("registry:settings_export"), {"profile": profile.pk})
    assert exported["Content-Disposition"] == f'attachment; filename="claude-settings-profile-{profile.pk}.json"'
    document = json.loads(exported.content)
    assert document == {"permissions": {"allow": [], "ask": ["Write"], "deny": ["mcp__slack"]}}
    assert sorted(read_permission_settings(exported.content.decode()).rules) == [("ask", "Write"), ("deny", "mcp__slack")]
    assert json.loads(admin_client.get(reverse("registry:settings_export")).content)["permissions"]["deny"] == ["mcp__slack"]


@pytest.mark.parametrize("data, message", [
    ({"settings_text": "not json"}, "Not Claude Code settings: not JSON"),
    ({"settings_text": '{"env": {}}'}, 'no &quot;permissions&quot; key'),
    ({"settings_text": "  "}, "Choose a settings file or paste one."),
])
def test_bad_files_get_a_clear_error_and_change_nothing(admin_client, data, message):
    response = admin_client.post(IMPORT, {**data, "action": "commit"})
    assert response.status_code == 200 and message in response.content.decode()
    assert not PermissionRule.objects.exists()


def test_a_binary_upload_and_an_unknown_profile_are_refused_plainly(admin_client):
    upload = SimpleUploadedFile("settings.json", b"\xff\xfe\x00", content_type="application/json")
    assert "The file is not UTF-8 text." in admin_client.post(IMPORT, {"settings_file": upload}).content.decode()
    missing = admin_client.get(reverse("registry:settings_export"), {"profile": "999999"}, follow=True)
    assert "No profile with id" in missing.content.decode()


def test_viewers_may_not_import_or_export(viewer_client):
    assert viewer_client.get(IMPORT).status_code == 403
    assert viewer_client.get(reverse("registry:settings_export")).status_code == 403
