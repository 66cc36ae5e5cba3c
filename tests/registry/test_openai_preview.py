""""What the model sees" for OpenAI's three wire styles: the same plan, OpenAI's request body."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.conversations.testing.fake_openai import validate_chat_request, validate_responses_request
from playground.registry import previews

pytestmark = pytest.mark.django_db
URL = reverse("registry:model_view")
HTMX = {"HX-Request": "true"}


def test_the_openai_styles_are_offered_and_show_openai_bodies(viewer_client, tools, profile):
    page = viewer_client.get(URL, {"profile": profile.pk, "wire_style": "openai-hosted"}).content.decode()
    assert '<option value="openai-hosted" selected' in page and 'value="openai-functions"' in page
    response = viewer_client.get(URL, {"profile": profile.pk, "wire_style": "openai-hosted"}, headers=HTMX)
    preview = response.context["preview"]
    assert {"type": "tool_search"} in preview.request["tools"]
    assert any(t.get("name") == "mcp__github" for t in preview.request["tools"])
    assert "OpenAI Responses API body" in response.content.decode()
    validate_responses_request(preview.request)


@pytest.mark.parametrize("style", ["openai-hosted", "openai-client", "openai-functions"])
def test_a_later_request_with_discovered_tools_is_valid_for_the_api(tools, profile, style):
    preview = previews.model_preview(profile, ["mcp__github__create_issue"], wire_style=style)
    assert preview.plan.discovered_tools == ["mcp__github__create_issue"]
    if style == "openai-functions":
        validate_chat_request(preview.request)
        assert "mcp__github__create_issue" in [t["function"]["name"] for t in preview.request["tools"]]
    else:
        validate_responses_request(preview.request)
