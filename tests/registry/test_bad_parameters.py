"""Unknown ids and out-of-range values get a clear message, never a silent default, a clamp or a 500."""
from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db
INSPECTOR = reverse("registry:inspector")
MODEL_VIEW = reverse("registry:model_view")
HTMX = {"HX-Request": "true"}


@pytest.mark.parametrize("value", ["0", "51", "-3", "1e3"])
def test_max_results_out_of_range_is_refused(viewer_client, tools, value):
    response = viewer_client.get(INSPECTOR, {"q": "github", "max_results": value}, headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="inspector-error"' in body and "max_results must be a whole number from 1 to 50" in body
    assert response.context["answer"].result is None


@pytest.mark.parametrize("value", ["999", "abc"])
def test_an_unknown_profile_on_the_inspector_is_an_error(viewer_client, tools, value):
    for headers, status in ((HTMX, 200), ({}, 400)):  # htmx swaps only 2xx answers; the page says 400
        response = viewer_client.get(INSPECTOR, {"q": "github", "profile": value}, headers=headers)
        assert response.status_code == status
        body = response.content.decode()
        assert f"unknown profile &#x27;{value}&#x27;: no profile has that id" in body
        assert 'data-testid="inspector-results" data-state="error"' in body


def test_an_unknown_profile_on_the_model_view_is_an_error(viewer_client, tools):
    for headers in (HTMX, {}):
        response = viewer_client.get(MODEL_VIEW, {"profile": "999"}, headers=headers)
        assert response.status_code == 200
        body = response.content.decode()
        assert 'data-state="error"' in body and "unknown profile &#x27;999&#x27;" in body


def test_an_error_does_not_claim_learning_from_usage_is_off(viewer_client, tools, settings):
    settings.TOOLSEARCH_LEARN_FROM_USAGE = True
    body = viewer_client.get(INSPECTOR, {"q": "github", "backend": "nonexistent"}, headers=HTMX).content.decode()
    assert 'data-testid="inspector-error"' in body
    assert "Learning from usage is off" not in body and 'data-testid="usage-line"' not in body
    body = viewer_client.get(INSPECTOR, {"q": "github", "backend": "bm25"}, headers=HTMX).content.decode()
    assert 'data-testid="usage-line"' in body  # still there when a search ran


def test_the_permission_tester_names_an_unknown_tool(admin_client, tools):
    response = admin_client.get(reverse("registry:permission_test"), {"tool": "mcp__github__create_isue"}, headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and 'data-testid="permission-decision"' not in body
    assert "No tool named &#x27;mcp__github__create_isue&#x27; in the registry" in body
    ok = admin_client.get(reverse("registry:permission_test"), {"tool": "mcp__github__create_issue"}, headers=HTMX)
    assert 'data-testid="permission-decision"' in ok.content.decode()


def test_after_an_error_the_form_does_not_offer_max_results_0(viewer_client, tools):
    response = viewer_client.get(INSPECTOR, {"q": "github", "profile": "999"})
    assert response.status_code == 400
    body = response.content.decode()
    assert 'name="max_results" min="1" max="50" value="5"' in body


@pytest.mark.parametrize("name", ["ToolSearch", "Agent"])
def test_the_permission_tester_knows_the_loop_s_own_tools(admin_client, tools, name):
    response = admin_client.get(reverse("registry:permission_test"), {"tool": name}, headers=HTMX)
    assert 'data-testid="permission-decision"' in response.content.decode()


def test_the_agent_tool_name_the_tester_knows_is_the_loop_s():
    from playground.conversations.subagents import AGENT_TOOL_NAME
    from playground.registry.forms import LOOP_TOOL_NAMES

    assert AGENT_TOOL_NAME in LOOP_TOOL_NAMES


@pytest.mark.parametrize(("url", "name", "value"), [(INSPECTOR, "mode", "sometimes"), (INSPECTOR, "wire_style", "server"),
                                                   (MODEL_VIEW, "mode", "sometimes"), (MODEL_VIEW, "wire_style", "pigeon")])
def test_a_mode_or_wire_style_the_page_does_not_offer_is_named(viewer_client, tools, url, name, value):
    body = viewer_client.get(url, {"q": "github", name: value}, headers=HTMX).content.decode()
    assert f"unknown {name.replace('_', ' ')} &#x27;{value}&#x27; (choose one of: " in body


def test_a_profile_id_too_big_for_the_database_is_unknown_not_a_500(viewer_client, tools):
    response = viewer_client.get(INSPECTOR, {"q": "github", "profile": "9" * 40}, headers=HTMX)
    assert response.status_code == 200 and "unknown profile" in response.content.decode()
