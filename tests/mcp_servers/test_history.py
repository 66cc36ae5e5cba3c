"""The workbench's call history: every kept call is pushed to the server's open pages (so another
tab, or a result that came after its page stopped waiting, shows up live), and a tool call, a
resource read or a prompt is made again from its row with the arguments it was kept with."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import server_log, services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.models import McpCallRecord
from playground.registry.models import Tool
from tests.mcp_servers.conftest import demo_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


def post(client, name, server, *args, data=None):
    return client.post(reverse(f"mcp_servers:{name}", args=[server.pk, *args]), data or {}, **HTMX)


@pytest.fixture
def synced_demo(stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    return stdio_demo_row


def test_each_kept_call_is_pushed_to_open_pages(admin_client, synced_demo, monkeypatch):
    pushed = []
    monkeypatch.setattr(server_log, "send_to_group", lambda group, message: pushed.append((group, message["html"])))
    post(admin_client, "server_ping", synced_demo)
    histories = [html for group, html in pushed if group == server_log.log_group(synced_demo.pk) and 'id="mcp-history"' in html]
    assert histories and 'hx-swap-oob="true"' in histories[-1] and 'data-kind="ping"' in histories[-1]


def test_a_tool_call_a_resource_read_and_a_prompt_are_made_again_from_the_history(admin_client, synced_demo):
    tool = Tool.objects.get(name="mcp__demo__echo")
    admin_client.post(reverse("mcp_servers:tool_call", args=[synced_demo.pk, tool.pk]),
                      {f"t{tool.pk}-mode": "form", f"t{tool.pk}-arg__text": "again please", f"t{tool.pk}-timeout": "20"}, **HTMX)
    post(admin_client, "resource_read", synced_demo, data={"uri": "demo://readme"})
    post(admin_client, "prompt_get", synced_demo, data={"name": "plan_trip", "declared": '[{"name": "city", "required": true}]',
                                                        "parg__city": "Tokyo"})
    records = {record.kind: record for record in McpCallRecord.objects.filter(server=synced_demo)}

    html = post(admin_client, "history_rerun", synced_demo, records["tool"].pk).content.decode()
    assert 'data-testid="rerun-outcome"' in html and 'data-ok="true"' in html and "again please" in html
    html = post(admin_client, "history_rerun", synced_demo, records["resource"].pk).content.decode()
    assert 'data-uri="demo://readme"' in html and "# playground-demo" in html
    html = post(admin_client, "history_rerun", synced_demo, records["prompt"].pk).content.decode()
    assert "Plan a 2-day trip to Tokyo" in html
    counts = {kind: McpCallRecord.objects.filter(server=synced_demo, kind=kind).count() for kind in ("tool", "resource", "prompt")}
    assert counts == {"tool": 2, "resource": 2, "prompt": 2}
    latest = McpCallRecord.objects.filter(server=synced_demo, kind="tool").first()
    assert latest.arguments == {"text": "again please"} and latest.ok


def test_what_cannot_be_made_again_says_why(admin_client, synced_demo):
    ping = McpCallRecord.objects.create(server=synced_demo, kind="ping", name="ping")
    assert post(admin_client, "history_rerun", synced_demo, ping.pk).status_code == 400
    masked = McpCallRecord.objects.create(server=synced_demo, kind="tool", name="mcp__demo__echo", arguments={"text": "********"})
    assert "keeps this call&#x27;s arguments masked" in post(admin_client, "history_rerun", synced_demo, masked.pk).content.decode()
    gone = McpCallRecord.objects.create(server=synced_demo, kind="tool", name="mcp__demo__vanished", arguments={})
    assert "no longer one of this server&#x27;s tools" in post(admin_client, "history_rerun", synced_demo, gone.pk).content.decode()
    assert McpCallRecord.objects.filter(server=synced_demo).count() == 3  # nothing was called
