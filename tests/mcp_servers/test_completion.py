"""Argument completion at the workbench (completion/complete), against the demo server: a prompt's
and a resource template's arguments get suggestions for what is typed so far, as datalist options;
the inputs are wired to ask only when the server offers completions; bad requests are 400s."""
from __future__ import annotations

import sys

import pytest
from django.urls import reverse

from playground.mcp_servers.models import McpCallRecord, McpServer
from tests.mcp_servers.conftest import DEMO_ARGS

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


def post(client, name, server, data=None):
    return client.post(reverse(f"mcp_servers:{name}", args=[server.pk]), data or {}, **HTMX)


def options(html):
    import re

    return re.findall(r'<option value="([^"]*)" data-testid="completion-option">', html)


def test_prompt_arguments_are_completed_as_typed(admin_client, stdio_demo_row):
    listed = post(admin_client, "prompt_list", stdio_demo_row).content.decode()
    assert 'list="prompt0-parg__city-options"' in listed and 'id="prompt0-parg__city-options"' in listed
    assert reverse("mcp_servers:completion", args=[stdio_demo_row.pk]) in listed

    form = {"ref_type": "prompt", "argument": "city", "name": "plan_trip", "parg__city": "s", "parg__days": ""}
    assert options(post(admin_client, "completion", stdio_demo_row, form).content.decode()) == ["san francisco", "sao paulo", "sydney"]
    form["parg__city"] = "sa"
    assert options(post(admin_client, "completion", stdio_demo_row, form).content.decode()) == ["san francisco", "sao paulo"]
    days = {"ref_type": "prompt", "argument": "days", "name": "plan_trip", "parg__city": "tokyo", "parg__days": ""}
    assert options(post(admin_client, "completion", stdio_demo_row, days).content.decode()) == [str(d) for d in range(1, 8)]
    assert not McpCallRecord.objects.filter(server=stdio_demo_row, name="completion/complete").exists()  # not one row per keystroke


def test_template_arguments_are_completed_as_typed(admin_client, stdio_demo_row):
    listed = post(admin_client, "resource_templates", stdio_demo_row).content.decode()
    assert 'list="tvar-1-city-options"' in listed and 'id="tvar-1-city-options"' in listed
    form = {"ref_type": "template", "argument": "city", "template": "demo://cities/{city}", "var__city": "to"}
    assert options(post(admin_client, "completion", stdio_demo_row, form).content.decode()) == ["tokyo"]


def test_bad_completion_requests_are_400s(admin_client, stdio_demo_row):
    assert post(admin_client, "completion", stdio_demo_row, {"ref_type": "tool", "argument": "x"}).status_code == 400
    assert post(admin_client, "completion", stdio_demo_row, {"ref_type": "prompt", "argument": "city", "name": "plan_trip"}).status_code == 400
    assert post(admin_client, "completion", stdio_demo_row,
                {"ref_type": "prompt", "argument": "city", "name": "plan_trip", "parg__city": "x" * 501}).status_code == 400


def test_a_server_without_completions_gets_plain_inputs(admin_client, db):
    bare = McpServer.objects.create(name="bare", command=sys.executable, args=DEMO_ARGS, env={"DEMO_SERVER_TOOLS_ONLY": "1"})
    html = post(admin_client, "completion", bare, {"ref_type": "prompt", "argument": "city", "name": "p", "parg__city": "s"}).content.decode()
    assert options(html) == [] and 'data-testid="completion-error"' not in html
