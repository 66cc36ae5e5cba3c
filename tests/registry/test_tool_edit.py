from __future__ import annotations

import json

import pytest
from django.urls import reverse

from playground.registry.models import Tool

from .conftest import make_tool

pytestmark = pytest.mark.django_db
CREATE = reverse("registry:tool_create")


def form_data(**overrides):
    data = {
        "name": "my_tool",
        "description": "Does a thing",
        "input_schema": json.dumps({"type": "object", "properties": {"x": {"type": "integer"}}}),
        "search_hint": "",
        "server_name": "",
        "source": "manual",
        "enabled": "on",
    }
    data.update(overrides)
    return data


def test_staff_creates_a_tool(admin_client):
    response = admin_client.post(CREATE, form_data())
    tool = Tool.objects.get(name="my_tool")
    assert response.status_code == 302
    assert response["Location"] == reverse("registry:tool_detail", args=[tool.pk])
    assert tool.input_schema["properties"]["x"] == {"type": "integer"}
    assert tool.token_estimate > 0


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": "bad name!"}, "name", "must match"),
        ({"name": "x" * 65}, "name", ""),
        ({"name": "ToolSearch"}, "name", "provided by the engine"),
        ({"input_schema": json.dumps({"type": "string"})}, "input_schema", "object schema"),
        ({"input_schema": "[1, 2]"}, "input_schema", "must be a JSON object"),
        ({"input_schema": "{not json"}, "input_schema", "JSON"),
        ({"input_schema": json.dumps({"type": "object", "properties": {"x": {"type": 12}}})}, "input_schema", "not a valid JSON Schema"),
    ],
)
def test_it_shows_validation_errors_in_the_form(admin_client, overrides, field, message):
    response = admin_client.post(CREATE, form_data(**overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors
    assert message in " ".join(errors[field])
    assert f'data-field="{field}"' in response.content.decode()
    assert not Tool.objects.exists()


def test_duplicate_names_are_rejected(admin_client):
    make_tool("my_tool")
    response = admin_client.post(CREATE, form_data())
    assert response.status_code == 400
    assert "already exists" in " ".join(response.context["form"].errors["name"])
    assert Tool.objects.count() == 1


def test_staff_edits_a_tool_and_the_token_estimate_follows(admin_client):
    tool = make_tool("my_tool", "short")
    before = tool.token_estimate
    response = admin_client.post(reverse("registry:tool_edit", args=[tool.pk]),
                                 form_data(description="a much longer description " * 10))
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.description.startswith("a much longer")
    assert tool.token_estimate > before


def test_viewer_gets_403_on_create_and_edit(viewer_client):
    tool = make_tool("my_tool")
    assert viewer_client.get(CREATE).status_code == 403
    assert viewer_client.post(CREATE, form_data(name="other")).status_code == 403
    assert viewer_client.post(reverse("registry:tool_edit", args=[tool.pk]), form_data(description="x")).status_code == 403
    tool.refresh_from_db()
    assert tool.description == ""
    assert not Tool.objects.filter(name="other").exists()


def test_anonymous_is_sent_to_login(client):
    response = client.get(CREATE)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_detail_shows_the_schema_pretty_printed(viewer_client, tools):
    tool = Tool.objects.get(name="mcp__github__create_issue")
    response = viewer_client.get(reverse("registry:tool_detail", args=[tool.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert '&quot;title&quot;: {' in body  # indented JSON
    assert 'data-deferred="true"' in body
    assert 'data-testid="edit-tool"' not in body
