from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_home_counts_enabled_and_deferred_tools(viewer_client, tools):
    response = viewer_client.get(reverse("home"))
    assert response.status_code == 200
    assert response.context["tool_count"] == 6
    assert response.context["deferred_count"] == 4
    assert 'data-testid="home-tool-count" data-count="6"' in response.content.decode()


def test_home_does_not_count_a_denied_tool_as_deferred(viewer_client, tools):
    # Before: 714 deferred on the home card, 712 on every other page (two tools denied by global rules).
    from playground.registry.models import PermissionRule, Tool

    denied = Tool.objects.filter(enabled=True, deferred=True).order_by("name").first()
    PermissionRule.objects.create(pattern=denied.name, effect="deny")
    response = viewer_client.get(reverse("home"))
    assert response.context["deferred_count"] == 3
    body = response.content.decode()
    assert 'data-testid="home-deferred-count">3<' in body and "1 denied by a rule, never sent" in body


def test_home_prices_all_tools_without_the_denied_ones(viewer_client, tools):
    """Before: "≈230,897 tokens if all were sent" counted 3 denied tools; a request never carries them."""
    from django.db.models import Sum

    from playground.registry.models import PermissionRule, Tool

    denied = Tool.objects.filter(enabled=True, deferred=True).order_by("name").first()
    assert denied.token_estimate > 0
    everything = Tool.objects.filter(enabled=True).aggregate(t=Sum("token_estimate"))["t"]
    PermissionRule.objects.create(pattern=denied.name, effect="deny")
    response = viewer_client.get(reverse("home"))
    assert response.context["tool_tokens"] == everything - denied.token_estimate


def test_home_requires_login(client):
    assert client.get(reverse("home")).status_code == 302


def test_home_links_every_page_of_the_navigation(admin_client, tools):
    body = admin_client.get(reverse("home")).content.decode()
    for name in ("registry:inspector", "registry:model_view", "registry:tool_list", "mcp_servers:server_list",
                 "registry:permissions", "registry:profile_list", "conversations:list", "evaluation:index"):
        assert f'href="{reverse(name)}"' in body, name


def test_home_and_navigation_hide_what_the_role_may_not_use(viewer_client, tools):
    # viewer_client is a plain user: an operator, who runs conversations but edits nothing
    body = viewer_client.get(reverse("home")).content.decode()
    assert f'href="{reverse("conversations:list")}"' in body
    assert f'href="{reverse("registry:permissions")}"' not in body
    assert f'href="{reverse("registry:tool_import")}"' not in body
