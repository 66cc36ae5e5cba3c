"""Elicitation at the workbench, against the demo server's `book_table` tool (elicitation/create):
the server's requested schema becomes a form (types, bounds, required fields, choices, defaults);
accept sends the typed content, decline and cancel send just the action; bad input is an error on
the card and nothing is sent; the agent loop's sessions offer no elicitation."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.forms import ElicitationForm
from playground.mcp_servers.models import McpCallRecord, McpServerRequest
from playground.registry.models import Tool
from tests.mcp_servers.conftest import demo_config
from tests.polling import wait_until

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def synced_demo(stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    return stdio_demo_row


def book(client, server, restaurant="Chez Demo"):
    tool = Tool.objects.get(name="mcp__demo__book_table")
    html = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]),
                       {f"t{tool.pk}-mode": "form", f"t{tool.pk}-arg__restaurant": restaurant, f"t{tool.pk}-timeout": "60"},
                       **HTMX).content.decode()
    assert 'data-testid="call-waiting"' in html, html
    return McpServerRequest.objects.get(server=server, status="pending")


def respond(client, server, row, **data):
    fields = {f"r{row.pk}-{key}" if key != "action" else key: value for key, value in data.items()}
    return client.post(reverse("mcp_servers:server_request_answer", args=[server.pk, row.pk]), fields, **HTMX).content.decode()


def result_of(server):
    return wait_until(lambda: McpCallRecord.objects.filter(server=server, name="mcp__demo__book_table").first(),
                      "the call's result", timeout=30)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_stray_processes")
def test_an_elicitation_is_a_form_from_its_schema_and_accepting_sends_typed_content(admin_client, synced_demo):
    row = book(admin_client, synced_demo)
    assert row.kind == "elicitation" and "Book a table at Chez Demo" in row.params["message"]
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[synced_demo.pk])).content.decode()
    assert 'data-testid="elicitation-form"' in page and f'name="r{row.pk}-el__guests"' in page and 'min="1"' in page
    assert f'name="r{row.pk}-el__seating"' in page and '<option value="outdoor">' in page

    # Out of the schema's bounds: an error on the card, nothing sent.
    card = respond(admin_client, synced_demo, row, action="accept", el__name="Ada", el__guests="40", el__seating="indoor")
    assert 'data-testid="server-request-error"' in card and "less than or equal to 12" in card
    row.refresh_from_db()
    assert row.is_pending

    card = respond(admin_client, synced_demo, row, action="accept", el__name="Ada", el__guests="4", el__seating="outdoor",
                   el__vegetarian="on")
    assert 'data-status="answered"' in card and "&quot;guests&quot;: 4" in card
    row.refresh_from_db()
    assert row.answer == {"action": "accept", "content": {"name": "Ada", "guests": 4, "seating": "outdoor", "vegetarian": True}}
    record = result_of(synced_demo)
    assert record.ok and "a table at Chez Demo for 4 under Ada, outdoor, vegetarian" in record.summary


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_stray_processes")
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_sends_just_that(admin_client, synced_demo, action):
    row = book(admin_client, synced_demo)
    card = respond(admin_client, synced_demo, row, action=action)  # required fields left empty: not checked
    assert f'data-status="{ {"decline": "declined", "cancel": "cancelled"}[action]}"' in card
    row.refresh_from_db()
    assert row.answer == {"action": action}
    assert f"No booking: the person chose {action}" in result_of(synced_demo).summary
    assert admin_client.post(reverse("mcp_servers:server_request_answer", args=[synced_demo.pk, row.pk]),
                             {"action": "answer"}).status_code == 400


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_stray_processes")
def test_the_agent_loops_sessions_offer_no_elicitation(synced_demo):
    outcome, _ = call_registered_tool(synced_demo, "mcp__demo__book_table", {"restaurant": "X"}, timeout=20)
    assert outcome.is_error and "did not answer the elicitation" in outcome.content[0]["text"]
    assert not McpServerRequest.objects.exists()


def test_the_form_follows_each_kind_of_schema_property():
    schema = {"type": "object", "required": ["email", "count"], "properties": {
        "email": {"type": "string", "format": "email", "title": "E-mail"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "count": {"type": "integer", "minimum": 2, "maximum": 5},
        "ratio": {"type": "number"},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "colour": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
        "short": {"type": "string", "maxLength": 3},
        "agree": {"type": "boolean", "default": True},
    }}
    form = ElicitationForm(schema, {"el__email": "a@b.co", "el__count": "3", "el__day": "2026-12-05", "el__size": "l",
                                    "el__colour": "g", "el__tags": ["a", "c"], "el__ratio": "0.5"})
    assert form.is_valid(), form.errors
    assert form.content() == {"email": "a@b.co", "count": 3, "day": "2026-12-05", "size": "l", "colour": "g",
                              "tags": ["a", "c"], "ratio": 0.5, "agree": False}
    assert dict(form.fields["el__colour"].choices)["g"] == "Green" and form.fields["el__email"].label == "E-mail"
    bad = ElicitationForm(schema, {"el__email": "nope", "el__count": "9", "el__short": "toolong", "el__site": "x"})
    assert not bad.is_valid() and {"el__email", "el__count", "el__short", "el__site"} <= set(bad.errors)
