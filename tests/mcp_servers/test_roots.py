"""Roots at the workbench, against the demo server's `list_roots` tool: the roots saved for a server
are what its workbench session answers to `roots/list`; saving new ones tells an open session
(`notifications/roots/list_changed`, which the demo server notes on stderr, so it shows in the live
log); bad roots are clear errors; the agent loop's sessions offer no roots."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.models import McpLogLine
from playground.registry.models import Tool
from tests.mcp_servers.conftest import demo_config
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def synced_demo(stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    return stdio_demo_row


def save_roots(client, server, text):
    return client.post(reverse("mcp_servers:server_roots", args=[server.pk]), {"roots_text": text}, **HTMX).content.decode()


def list_roots(client, server):
    """The call's result (without the call history the answer also carries)."""
    tool = Tool.objects.get(name="mcp__demo__list_roots")
    html = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]),
                       {f"t{tool.pk}-mode": "form", f"t{tool.pk}-timeout": "20"}, **HTMX).content.decode()
    return html.split('id="mcp-history"')[0]


def test_the_saved_roots_are_what_the_server_lists_and_a_change_is_announced(admin_client, synced_demo):
    saved = save_roots(admin_client, synced_demo, "file:///srv/project Project\n\nfile:///tmp/scratch\n")
    assert 'data-notified="false"' in saved and "No session is open here" in saved  # nothing to tell yet
    synced_demo.refresh_from_db()
    assert synced_demo.roots == [{"uri": "file:///srv/project", "name": "Project"}, {"uri": "file:///tmp/scratch"}]

    html = list_roots(admin_client, synced_demo)
    assert 'data-ok="true"' in html and "file:///srv/project (Project)" in html and "file:///tmp/scratch" in html
    assert McpLogLine.objects.filter(server_id=synced_demo.pk, text__contains="listed the client's roots (roots/list): 2").exists()

    # The session is open now: saving tells it, and the server says it heard (its stderr, in the log).
    saved = save_roots(admin_client, synced_demo, "file:///home/ada/notes Notes")
    assert 'data-notified="true"' in saved and "notifications/roots/list_changed" in saved
    wait_until(lambda: McpLogLine.objects.filter(server_id=synced_demo.pk, source="stderr",
                                                 text__contains="the client's roots changed").exists(),
               "the server's note that it got notifications/roots/list_changed", timeout=20)
    html = list_roots(admin_client, synced_demo)
    assert "file:///home/ada/notes (Notes)" in html and "file:///srv/project" not in html

    save_roots(admin_client, synced_demo, "")
    assert "The client offers no roots" in list_roots(admin_client, synced_demo)


def test_bad_roots_are_clear_errors_and_change_nothing(admin_client, synced_demo):
    synced_demo.roots = [{"uri": "file:///kept"}]
    synced_demo.save()
    for text, message in (("https://example.com/x", "a root is a file:// URI"), ("relative/path", "a root is a file:// URI"),
                          ("file:///a\nfile:///a", "listed twice"), ("\n".join(f"file:///r{i}" for i in range(51)), "at most 50 roots")):
        html = save_roots(admin_client, synced_demo, text)
        assert 'data-testid="roots-error"' in html and message in html, (text, html)
    synced_demo.refresh_from_db()
    assert synced_demo.roots == [{"uri": "file:///kept"}]
    plain = admin_client.post(reverse("mcp_servers:server_roots", args=[synced_demo.pk]), {"roots_text": "nope"})
    assert plain.status_code == 400


def test_the_agent_loops_sessions_offer_no_roots(synced_demo):
    synced_demo.roots = [{"uri": "file:///srv/project"}]
    synced_demo.save()
    outcome, _ = call_registered_tool(synced_demo, "mcp__demo__list_roots", {}, timeout=20)
    assert outcome.is_error and "did not list its roots" in outcome.content[0]["text"]
