"""Resource templates and subscriptions at the workbench, against the demo server: templates are
listed with a field per RFC 6570 variable, filled, expanded (values encoded) and read; a resource
subscribed to sends `notifications/resources/updated` into the live log when it changes, and no
more once unsubscribed; bad input is a 400; a server without subscriptions says so."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.models import McpCallRecord, McpLogLine
from playground.registry.models import Tool
from tests.mcp_servers.conftest import demo_config
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


def post(client, name, server, data=None):
    return client.post(reverse(f"mcp_servers:{name}", args=[server.pk]), data or {}, **HTMX)


@pytest.fixture
def synced_demo(stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    return stdio_demo_row


def bump(client, server):
    tool = Tool.objects.get(name="mcp__demo__bump_counter")
    html = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]),
                       {f"t{tool.pk}-mode": "form", f"t{tool.pk}-timeout": "20"}, **HTMX).content.decode()
    return html.split('id="mcp-history"')[0]


def test_templates_are_listed_filled_and_read(admin_client, stdio_demo_row):
    html = post(admin_client, "resource_templates", stdio_demo_row).content.decode()
    assert 'data-template="demo://cities/{city}"' in html and 'name="var__city"' in html and "One city&#x27;s IANA time zone" in html

    read = post(admin_client, "resource_template_read", stdio_demo_row,
                {"template": "demo://cities/{city}", "var__city": "new york"}).content.decode()
    assert 'data-ok="true"' in read and 'data-uri="demo://cities/new%20york"' in read and "America/New_York" in read
    call = McpCallRecord.objects.filter(server=stdio_demo_row, kind="resource").first()
    # Kept in the history, its URI as the history keeps every URI: path parts that are not plain words masked.
    assert call.ok and set(call.arguments) == {"uri", "template"} and call.arguments["uri"].startswith("demo://cities/")

    unknown = post(admin_client, "resource_template_read", stdio_demo_row,
                   {"template": "demo://cities/{city}", "var__city": "Atlantis"}).content.decode()
    assert 'data-ok="false"' in unknown

    assert post(admin_client, "resource_template_read", stdio_demo_row, {"template": ""}).status_code == 400
    assert post(admin_client, "resource_template_read", stdio_demo_row,
                {"template": "demo://{x}", "var__x": "y" * 2100}).status_code == 400


def test_a_subscribed_resource_reports_its_updates_in_the_log_until_unsubscribed(admin_client, synced_demo):
    listed = post(admin_client, "resource_list", synced_demo).content.decode()
    assert 'data-uri="demo://counter"' in listed and 'data-testid="subscribe-resource"' in listed

    done = post(admin_client, "resource_subscribe", synced_demo, {"uri": "demo://counter", "action": "subscribe"}).content.decode()
    assert 'data-ok="true"' in done and "Subscribed" in done
    assert "1 subscribed session(s) told" in bump(admin_client, synced_demo)
    wait_until(lambda: McpLogLine.objects.filter(server_id=synced_demo.pk, source="notification",
                                                 text="notifications/resources/updated demo://counter").exists(),
               "the update notification in the server log", timeout=20)

    done = post(admin_client, "resource_subscribe", synced_demo, {"uri": "demo://counter", "action": "unsubscribe"}).content.decode()
    assert 'data-ok="true"' in done and "Unsubscribed" in done
    assert "0 subscribed session(s) told" in bump(admin_client, synced_demo)
    kinds = list(McpCallRecord.objects.filter(server=synced_demo).values_list("kind", flat=True))
    assert "subscribe" in kinds and "unsubscribe" in kinds

    assert post(admin_client, "resource_subscribe", synced_demo, {"uri": "demo://counter", "action": "watch"}).status_code == 400
    assert post(admin_client, "resource_subscribe", synced_demo, {"uri": ""}).status_code == 400


def test_a_server_without_resources_says_so(admin_client, db):
    import sys

    from playground.mcp_servers.models import McpServer
    from tests.mcp_servers.conftest import DEMO_ARGS

    bare = McpServer.objects.create(name="bare", command=sys.executable, args=DEMO_ARGS, env={"DEMO_SERVER_TOOLS_ONLY": "1"})
    assert 'data-testid="templates-unsupported"' in post(admin_client, "resource_templates", bare).content.decode()
    outcome = post(admin_client, "resource_subscribe", bare, {"uri": "demo://counter", "action": "subscribe"}).content.decode()
    assert 'data-ok="false"' in outcome and "does not offer subscriptions" in outcome
