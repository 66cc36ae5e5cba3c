from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from playground.registry.models import AgentProfile, PermissionRule, Tool

from .conftest import make_tool

pytestmark = pytest.mark.django_db


def form_data(**overrides):
    data = {
        "name": "New profile", "system_prompt": "", "model": "", "tool_search_mode": "auto:15", "wire_style": "client",
        "search_backend": "", "max_results": 7, "announcement_style": "delta", "announcement_layout": "flat",
        "announcement_budget": 0, "allowed_tools": "",
        "disallowed_tools": "Write\nmcp__slack", "is_subagent": "",
    }
    data.update(overrides)
    return data


def test_list_requires_login(client):
    response = client.get(reverse("registry:profile_list"))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_viewer_reads_the_list_and_detail(viewer_client, tools, profile):
    body = viewer_client.get(reverse("registry:profile_list")).content.decode()
    assert 'data-profile="Native"' in body and 'data-testid="new-profile"' not in body
    response = viewer_client.get(reverse("registry:profile_detail", args=[profile.pk]))
    assert response.status_code == 200 and 'data-testid="edit-profile"' not in response.content.decode()


def test_viewer_cannot_create_or_edit(viewer_client, profile):
    assert viewer_client.get(reverse("registry:profile_create")).status_code == 403
    assert viewer_client.post(reverse("registry:profile_create"), form_data()).status_code == 403
    assert viewer_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(name="Renamed")).status_code == 403
    assert list(AgentProfile.objects.values_list("name", flat=True)) == ["Native"]


def test_an_empty_list_says_what_runs_without_a_profile_and_links_the_form(admin_client):
    page = admin_client.get(reverse("registry:profile_list")).content.decode()
    assert 'data-testid="profiles-empty"' in page and "use the default settings" in page
    assert f'<a href="{reverse("registry:profile_create")}">Create one</a>' in page


def test_staff_creates_a_profile(admin_client):
    response = admin_client.post(reverse("registry:profile_create"), form_data())
    profile = AgentProfile.objects.get(name="New profile")
    assert response["Location"] == reverse("registry:profile_detail", args=[profile.pk])
    assert profile.disallowed_tools == ["Write", "mcp__slack"]
    assert (profile.tool_search_mode, profile.wire_style, profile.max_results) == ("auto:15", "client", 7)


def test_the_profile_form_sets_prompt_caching_and_the_detail_page_shows_it(admin_client, settings):
    settings.PROMPT_CACHE = False
    admin_client.post(reverse("registry:profile_create"), form_data(prompt_cache="on", prompt_cache_ttl="1h"))
    profile = AgentProfile.objects.get(name="New profile")
    assert (profile.prompt_cache, profile.prompt_cache_ttl) == ("on", "1h")
    page = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert 'data-testid="profile-prompt-cache">on, TTL 1h' in page
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(prompt_cache="", prompt_cache_ttl=""))
    page = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert 'data-testid="profile-prompt-cache">off <span class="muted">(deployment default)' in page
    response = admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(prompt_cache_ttl="2h"))
    assert response.status_code == 400 and "prompt_cache_ttl" in response.context["form"].errors  # a clear error, no 500


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tool_search_mode": "sometimes"}, "tool_search_mode"),
        ({"disallowed_tools": "mcp__x__y*"}, "disallowed_tools"),
        ({"max_results": 0}, "max_results"),
        ({"search_backend": "nope"}, "search_backend"),
        ({"search_backend": "hybrid", "backend_settings": "aspect_wieght=0"}, "backend_settings"),
        ({"search_backend": "bm25", "backend_settings": 'k1="abc"'}, "backend_settings"),
        ({"search_backend": "postgres", "backend_settings": 'dsn="postgres://x@h/db"'}, "backend_settings"),
        ({"search_backend": "", "backend_settings": "k1=1.5"}, "backend_settings"),
        ({"announcement_layout": "tree"}, "announcement_layout"),
        ({"announcement_budget": 99}, "announcement_budget"),
        ({"announcement_budget": -5}, "announcement_budget"),
        ({"announcement_budget": 10**9}, "announcement_budget"),
    ],
)
def test_invalid_profiles_show_errors(admin_client, overrides, field):
    response = admin_client.post(reverse("registry:profile_create"), form_data(**overrides))
    assert response.status_code == 400
    assert field in response.context["form"].errors
    assert not AgentProfile.objects.exists()


def test_staff_edits_a_profile(admin_client, profile):
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(name="Native", tool_search_mode="false"))
    profile.refresh_from_db()
    assert profile.tool_search_mode == "false"


@override_settings(AGENT_TOOL_DENYLIST=["Agent"])
def test_detail_resolves_the_subagent_tool_set(viewer_client, tools, subagent_profile):
    make_tool("Agent", "Start a subagent", source=Tool.Source.BUILTIN)
    subagent_profile.disallowed_tools = ["Write"]
    subagent_profile.save()
    PermissionRule.objects.create(effect="deny", pattern="mcp__slack", profile=subagent_profile)
    response = viewer_client.get(reverse("registry:profile_detail", args=[subagent_profile.pk]))
    assert set(response.context["removed_by_profile"]) == {"Agent", "Write"}
    assert response.context["filtered"].excluded_names == ["mcp__slack__post_message"]
    body = response.content.decode()
    assert 'data-removed-count="2"' in body and 'data-excluded-count="1"' in body
    plan = response.context["preview"].plan
    sent = {t["name"] for t in plan.tools}
    assert "Agent" not in sent and "Write" not in sent


def test_a_profile_the_engine_cannot_run_shows_why(viewer_client, tools, profile):
    profile.announcement_style = "sometimes"  # only possible through the admin or raw SQL
    profile.save()
    response = viewer_client.get(reverse("registry:profile_detail", args=[profile.pk]))
    assert response.status_code == 200
    assert 'data-testid="profile-error"' in response.content.decode()


def test_the_form_offers_every_provider_and_defaults_to_automatic(admin_client):
    body = admin_client.get(reverse("registry:profile_create")).content.decode()
    for value in ("", "anthropic", "demo"):
        assert f'<option value="{value}"' in body
    admin_client.post(reverse("registry:profile_create"), form_data())
    assert AgentProfile.objects.get(name="New profile").provider == ""


def test_staff_sets_the_provider_and_the_detail_shows_it(admin_client, profile):
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(name="Native", provider="demo"))
    profile.refresh_from_db()
    assert profile.provider == "demo"
    body = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert 'data-provider="demo">offline demo agent</dd>' in body  # the provider class's own label


def test_an_unknown_provider_is_rejected(admin_client, profile):
    response = admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(name="Native", provider="carrier-pigeon"))
    assert response.status_code == 400 and "provider" in response.context["form"].errors
    profile.refresh_from_db()
    assert profile.provider == ""


def test_a_profile_keeps_a_tuned_backend_and_its_edit_form_shows_it_split(admin_client):
    admin_client.post(reverse("registry:profile_create"), form_data(search_backend="hybrid", backend_settings=" aspect_weight=0:intent_weight=0 "))
    profile = AgentProfile.objects.get(name="New profile")
    assert profile.search_backend == "hybrid:aspect_weight=0:intent_weight=0"
    form = admin_client.get(reverse("registry:profile_edit", args=[profile.pk])).context["form"]
    assert form.initial["search_backend"] == "hybrid" and form.initial["backend_settings"] == "aspect_weight=0:intent_weight=0"
    detail = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert "hybrid:aspect_weight=0:intent_weight=0" in detail
    # Clearing the settings leaves the plain backend.
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(search_backend="hybrid", backend_settings=""))
    profile.refresh_from_db()
    assert profile.search_backend == "hybrid"


def test_a_profiles_announcement_layout_reaches_the_engine_and_what_the_model_sees(admin_client, tools):
    admin_client.post(reverse("registry:profile_create"), form_data(announcement_layout="budgeted", announcement_budget=500, tool_search_mode="true"))
    profile = AgentProfile.objects.get(name="New profile")
    assert (profile.announcement_layout, profile.announcement_budget) == ("budgeted", 500)
    detail = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert "budgeted layout (budget 500 tokens)" in detail
    view = admin_client.get(reverse("registry:model_view"), {"profile": profile.pk})
    plan = view.context["preview"].plan
    assert plan.announcement.layout == "budgeted"  # its grouped list fits the budget, so that is what goes
    assert "mcp__github: " in plan.announcement.text and "mcp__github__create_issue" not in plan.announcement.text
    assert "budgeted layout" in view.content.decode()


def test_a_profile_takes_an_absolute_token_threshold_and_the_model_view_decides_by_it(admin_client):
    admin_client.post(reverse("registry:profile_create"), form_data(tool_search_mode="auto:1.5m tokens"))
    profile = AgentProfile.objects.get(name="New profile")
    assert profile.tool_search_mode == "auto:1.5m tokens"
    page = admin_client.get(reverse("registry:model_view") + f"?profile={profile.pk}").content.decode()
    assert "auto:1500000tokens" in page


def test_the_detail_page_shows_a_tool_changes_profiles_prediction_settings(admin_client):
    """The form's three tool-changes fields are what the engine gets: the detail page says them, and
    says nothing of them for a style that predicts nothing."""
    admin_client.post(reverse("registry:profile_create"), form_data(
        wire_style="tool-changes", tool_changes_k=3, tool_changes_min_score="0.25", tool_changes_search=""))
    profile = AgentProfile.objects.get(name="New profile")
    page = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert ('data-testid="profile-tool-changes">before each message, the top 3 scoring at least 0.25 added by tool_addition; '
            "no ToolSearch (the prediction only)</dd>") in page
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(
        wire_style="tool-changes", tool_changes_k=5, tool_changes_min_score="0", tool_changes_search="on"))
    page = admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
    assert ('data-testid="profile-tool-changes">before each message, the top 5 scoring at least 0 added by tool_addition; '
            "ToolSearch kept for what the prediction missed</dd>") in page
    admin_client.post(reverse("registry:profile_edit", args=[profile.pk]), form_data(tool_changes_k=5, tool_changes_min_score="0"))
    profile.refresh_from_db()
    assert profile.wire_style == "client"
    assert 'data-testid="profile-tool-changes"' not in admin_client.get(reverse("registry:profile_detail", args=[profile.pk])).content.decode()
