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


def test_home_requires_login(client):
    assert client.get(reverse("home")).status_code == 302
