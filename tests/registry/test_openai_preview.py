""""What the model sees" for OpenAI's three wire styles: the same plan, OpenAI's request body."""
from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from playground.conversations.testing.fake_openai import validate_chat_request, validate_responses_request
from playground.registry import previews
from tests.cli_runner import run_cli

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


def test_the_hosted_style_shows_what_its_request_carries_no_announcement(viewer_client, tools, profile, tmp_path):
    """OpenAI's hosted style sends the deferred functions in namespaces and no announcement: the page
    lists the namespaces with their functions and shows no announcement, and the request it shows is
    the `request --wire openai-hosted` body of the same tools."""
    response = viewer_client.get(URL, {"profile": profile.pk, "wire_style": "openai-hosted"}, headers=HTMX)
    page = response.content.decode()
    preview = response.context["preview"]
    assert preview.announcement is None and preview.tokens.announcement_tokens == 0
    assert 'data-testid="announcement"' not in page and 'data-testid="no-announcement"' in page
    assert "available-deferred-tools" not in page  # neither in the announcement card nor as the system prompt
    assert "instructions" not in preview.request and '<pre data-testid="system-prompt">(none)</pre>' in page
    github = page[page.index('data-tool="mcp__github"'):page.index('data-tool="mcp__slack"')]
    assert [f'data-tool="{n}" data-deferred="true"' in github for n in ("create_issue", "delete_repo", "list_issues")] == [True] * 3
    assert 'data-tool="tool_search"' in page

    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text("\n".join(json.dumps({"name": t.name, "description": t.description, "input_schema": t.input_schema,
                                             "always_load": t.always_load})
                                   for t in sorted(tools, key=lambda t: t.name) if t.enabled))  # the profile catalog's order
    printed = run_cli("request", "--catalog", str(catalog), "--wire", "openai-hosted", "--json")
    assert printed.returncode == 0, printed.stderr
    body = json.loads(printed.stdout)["request"]
    shown = json.loads(html.unescape(page.split('<pre data-testid="api-request">')[1].split("</pre>")[0]))
    assert shown["tools"] == body["tools"] and "instructions" not in body
