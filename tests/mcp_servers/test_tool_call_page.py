"""Server detail actions against the real demo server: test connection, sync now (Celery, eager
here; a real worker in test_celery_worker.py), progress, and the schema-generated call form."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.celery_app import app as celery_app
from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.forms import ToolCallForm
from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(scope="module")
def demo_listing():
    """The demo server's tools/list, fetched once for the module (calls still go to the real server)."""
    from tests.mcp_servers.conftest import demo_config

    return list_server_tools(demo_config())


@pytest.fixture
def synced_demo(stdio_demo_row, demo_listing):
    assert services.apply_listing(stdio_demo_row, *demo_listing).ok
    return stdio_demo_row


@pytest.fixture
def eager_celery():
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


def call_url(server, tool_name):
    tool = Tool.objects.get(name=tool_name)
    return reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]), f"t{tool.pk}"


def test_test_connection_reports_the_server_and_its_tool_count(admin_client, stdio_demo_row):
    response = admin_client.post(reverse("mcp_servers:server_test", args=[stdio_demo_row.pk]), **HTMX)
    html = response.content.decode()
    assert 'data-ok="true"' in html and "playground-demo" in html and "15 tools" in html
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.PENDING  # a test does not change the stored status


def test_test_connection_counts_the_tools_and_keeps_none(admin_client, stdio_demo_row, monkeypatch):
    """The probe counts every tool page by page but holds none (it listed and held all of them, for a
    server with thousands only to count them), and stores none: a sync does."""
    from playground.mcp_servers import connection

    listed = []
    original = connection.list_server_tools

    def recording(config, **options):
        tools, probe = original(config, **options)
        listed.append((options.get("keep"), len(tools), probe.tool_count))
        return tools, probe

    monkeypatch.setattr(connection, "list_server_tools", recording)
    html = admin_client.post(reverse("mcp_servers:server_test", args=[stdio_demo_row.pk]), **HTMX).content.decode()
    assert 'data-ok="true"' in html and "15 tools" in html
    assert listed == [(0, 0, 15)]
    assert not Tool.objects.filter(server=stdio_demo_row).exists()


def test_test_connection_shows_why_it_failed(admin_client, db):
    server = McpServer.objects.create(name="ghost", command="/nonexistent/mcp-server")
    html = admin_client.post(reverse("mcp_servers:server_test", args=[server.pk]), **HTMX).content.decode()
    assert 'data-ok="false"' in html and "No such file" in html


def test_sync_now_runs_the_task_and_progress_shows_the_result(admin_client, stdio_demo_row, eager_celery, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("mcp_servers:server_sync", args=[stdio_demo_row.pk]), **HTMX)
    assert response.status_code == 200
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.CONNECTED
    html = admin_client.get(reverse("mcp_servers:server_sync_progress", args=[stdio_demo_row.pk]), **HTMX).content.decode()
    assert 'data-testid="sync-outcome" data-ok="true"' in html
    assert "15 added" in html
    assert 'data-status="connected"' in html and 'hx-swap-oob="true"' in html
    assert 'data-tool="mcp__demo__add"' in html  # the refreshed tool table


def test_progress_keeps_polling_while_pending(admin_client, stdio_demo_row):
    html = admin_client.get(reverse("mcp_servers:server_sync_progress", args=[stdio_demo_row.pk]) + "?polls=30", **HTMX).content.decode()
    assert 'hx-trigger="every 3s"' in html and "Celery worker" in html


def test_the_detail_page_lists_tools_with_a_call_form_each(admin_client, synced_demo):
    html = admin_client.get(reverse("mcp_servers:server_detail", args=[synced_demo.pk])).content.decode()
    assert html.count('data-testid="call-form"') == 15
    assert 'data-tool="mcp__demo__echo"' in html and "always loaded" in html
    assert 'data-testid="last-synced"' in html


def test_viewers_see_disabled_call_forms_and_cannot_call(viewer_client, synced_demo):
    html = viewer_client.get(reverse("mcp_servers:server_detail", args=[synced_demo.pk])).content.decode()
    assert "(admins only)" in html and "<fieldset disabled>" in html
    url, prefix = call_url(synced_demo, "mcp__demo__add")
    assert viewer_client.post(url, {f"{prefix}-mode": "form", f"{prefix}-timeout": "5"}).status_code == 403


def test_a_call_with_form_fields_shows_the_result_and_its_duration(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__add")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__a": "2", f"{p}-arg__b": "40", f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert 'data-testid="call-outcome" data-ok="true"' in html
    assert "42.0" in html and 'data-testid="call-duration"' in html
    assert "&quot;result&quot;: 42.0" in html  # structured content


def test_a_call_with_raw_json_uses_it(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__lookup_city_timezone")
    html = admin_client.post(url, {f"{p}-mode": "raw", f"{p}-raw_arguments": '{"city": "Sydney"}', f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert "Australia/Sydney" in html and 'data-ok="true"' in html


def test_bad_raw_json_is_reported_without_calling(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__add")
    html = admin_client.post(url, {f"{p}-mode": "raw", f"{p}-raw_arguments": "{nope", f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert 'data-invalid="true"' in html and "not valid JSON" in html


def test_a_missing_required_field_is_reported(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__add")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__a": "2", f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert 'data-invalid="true"' in html and "This field is required" in html


def test_an_error_result_is_shown_as_such(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__fail")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__reason": "bad day", f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert 'data-is-error="true"' in html and "bad day" in html


def test_a_timeout_is_shown_as_an_error(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__slow")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__seconds": "30", f"{p}-timeout": "0.5"}, **HTMX).content.decode()
    assert 'data-is-error="true"' in html and "timed out after 0.5 s" in html


def test_an_image_result_is_shown(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__render_badge")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__color": "red", f"{p}-timeout": "10"}, **HTMX).content.decode()
    assert 'data-testid="call-image"' in html and "data:image/png;base64," in html
    assert 'data-testid="call-text"' not in html  # the image block is not also shown as an empty text box


def test_without_htmx_the_result_gets_a_full_page(admin_client, synced_demo):
    url, p = call_url(synced_demo, "mcp__demo__echo")
    html = admin_client.post(url, {f"{p}-mode": "form", f"{p}-arg__text": "hello", f"{p}-timeout": "10"}).content.decode()
    assert "<html" in html and "hello" in html


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "draft": {"type": "boolean"},
        "state": {"type": "string", "enum": ["open", "closed"]},
        "labels": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "required": ["title", "count"],
}


def test_the_call_form_is_generated_from_the_schema():
    form = ToolCallForm(SCHEMA, {
        "mode": "form", "timeout": "30", "arg__title": "Bug", "arg__count": "2", "arg__ratio": "0.5",
        "arg__draft": "false", "arg__state": '"closed"', "arg__labels": '["a", "b"]', "arg__extra": "",
    })
    assert form.is_valid(), form.errors
    assert form.cleaned_data["arguments"] == {
        "title": "Bug", "count": 2, "ratio": 0.5, "draft": False, "state": "closed", "labels": ["a", "b"],
    }


def test_the_call_form_checks_types():
    form = ToolCallForm(SCHEMA, {"mode": "form", "timeout": "30", "arg__title": "x", "arg__count": "0", "arg__labels": '{"a": 1}'})
    assert not form.is_valid()
    assert "arg__count" in form.errors and "must be a JSON array" in str(form.errors["arg__labels"])


def test_required_arguments_are_flagged_before_call_and_each_says_its_type():
    """Required fields were only reported after Call: they now carry `required` (the browser flags an
    empty one at once) and every label says whether it is required and what it takes; Raw JSON
    turns that validation off (its fields stay empty)."""
    from django.template.loader import render_to_string

    from playground.mcp_servers.forms import ToolCallForm

    schema = {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}}}
    form = ToolCallForm(schema, prefix="t")
    html = str(form["arg__city"]) + str(form["arg__days"])
    assert html.count(" required") == 1 and 'name="t-arg__city"' in str(form["arg__city"]) and "required" in str(form["arg__city"])
    labels = [form.fields[f"arg__{name}"].label for name in ("city", "days", "unit")]
    assert labels == ["city (required, string)", "days (optional, integer)", "unit (optional, one of the listed values)"]
    page = render_to_string("mcp_servers/_tool_call_form.html", {"form": form, "server": type("S", (), {"pk": 1})(),
                                                                 "tool": type("T", (), {"pk": 2, "name": "x"})(),
                                                                 "has_role": {"admin": True}})
    assert "noValidate = event.target.value === 'raw'" in page
