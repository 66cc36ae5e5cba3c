"""The "server" wire style (Anthropic's server-side search tool): offered by the profile form, and the
model view / profile detail show the request the conversations loop would send for it."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.engine.wires.anthropic_server import SERVER_SEARCH_TOOLS
from playground.engine.toolsearch_tool import TOOL_SEARCH_TOOL
from playground.registry import previews
from playground.registry.models import AgentProfile

from .test_profiles import form_data

pytestmark = pytest.mark.django_db
URL = reverse("registry:model_view")
HTMX = {"HX-Request": "true"}


@pytest.fixture
def server_profile(db):
    return AgentProfile.objects.create(name="Server", tool_search_mode="true", wire_style="server")


def test_the_form_offers_the_server_style(admin_client):
    body = admin_client.get(reverse("registry:profile_create")).content.decode()
    assert '<option value="server"' in body
    response = admin_client.post(reverse("registry:profile_create"), form_data(wire_style="server", provider="anthropic"))
    assert response.status_code == 302
    assert AgentProfile.objects.get(name="New profile").wire_style == "server"


def test_the_demo_agent_cannot_take_the_server_style(admin_client):
    response = admin_client.post(reverse("registry:profile_create"), form_data(wire_style="server", provider="demo"))
    assert response.status_code == 400
    assert "demo agent" in str(response.context["form"].errors["wire_style"])
    assert not AgentProfile.objects.filter(name="New profile").exists()


def test_the_model_view_shows_the_server_search_request(settings, viewer_client, tools, server_profile, deny_delete_rule):
    settings.ANTHROPIC_SERVER_SEARCH_TOOL = "regex"
    response = viewer_client.get(URL, {"profile": server_profile.pk}, headers=HTMX)
    assert response.status_code == 200
    preview = response.context["preview"]
    names = [t["name"] for t in preview.tools]
    plan = preview.plan
    assert TOOL_SEARCH_TOOL.name not in names  # replaced by the server's tool
    assert preview.server_search_tool == SERVER_SEARCH_TOOLS["regex"]
    deferred = {t["name"] for t in preview.defer_loading_tools}
    assert deferred == {t.name for t in plan.searchable.deferred}  # every permitted deferred tool
    assert "mcp__github__create_issue" in deferred
    assert "mcp__github__delete_repo" not in names  # denied: never sent
    assert {t["name"] for t in preview.loaded_tools} == {t["name"] for t in plan.tools} - {TOOL_SEARCH_TOOL.name}
    body = response.content.decode()
    assert 'data-state="ready"' in body and 'data-server-search="regex"' in body
    assert "tool_search_tool_regex_20251119" in body and 'data-deferred="true"' in body


def test_the_model_view_uses_the_loops_rewrite(viewer_client, tools, server_profile):
    """Same function, same answer: the preview's request is server_search_request(plan's request)."""
    from playground.engine.wires.anthropic_server import server_search_request

    preview = previews.model_preview(server_profile)
    expected = server_search_request(dict(preview.plan.to_api_kwargs()), preview.plan, "bm25")
    assert preview.request == expected


def test_the_server_style_can_be_picked_on_the_model_view(viewer_client, tools, profile):
    response = viewer_client.get(URL, {"profile": profile.pk, "wire_style": "server"})
    assert response.status_code == 200
    assert response.context["preview"].server_search == "bm25"
    assert '<option value="server" selected' in response.content.decode()


def test_tool_search_off_sends_the_plain_request(viewer_client, tools, server_profile):
    server_profile.tool_search_mode = "false"
    server_profile.save()
    preview = viewer_client.get(URL, {"profile": server_profile.pk}, headers=HTMX).context["preview"]
    assert preview.server_search == "" and preview.server_search_tool is None
    assert preview.defer_loading_tools == []
    assert "mcp__github__create_issue" in [t["name"] for t in preview.tools]


def test_the_profile_detail_shows_the_server_request(viewer_client, tools, server_profile):
    response = viewer_client.get(reverse("registry:profile_detail", args=[server_profile.pk]))
    body = response.content.decode()
    assert response.status_code == 200 and 'data-testid="profile-error"' not in body
    assert response.context["preview"].server_search == "bm25"
    assert "tool_search_tool_bm25_20251119" in body and 'data-testid="server-search-tool"' in body


def test_a_bad_server_search_setting_is_an_error_not_a_crash(settings, viewer_client, tools, server_profile):
    settings.ANTHROPIC_SERVER_SEARCH_TOOL = "fuzzy"
    response = viewer_client.get(URL, {"profile": server_profile.pk}, headers=HTMX)
    assert response.status_code == 200 and 'data-state="error"' in response.content.decode()
    assert "fuzzy" in response.context["error"]
