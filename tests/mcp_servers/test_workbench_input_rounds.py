"""MRTR at the workbench: a 2026-07-28 server's InputRequiredResult becomes a person's card filed
under the request and round that asked it; the person's answer (or refusal) goes back with the
request sent again with the server's requestState, and the Protocol view shows the rounds together."""
from __future__ import annotations

import sys

import pytest
from django.urls import reverse

from playground.mcp_servers import protocol_log, services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.models import McpProtocolMessage, McpServer
from tests.mcp_servers.conftest import DEMO_ARGS, demo_config
from tests.mcp_servers.test_elicitation import book, respond, result_of
from tests.polling import wait_until

MODERN = "2026-07-28"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_stray_processes")
@pytest.mark.parametrize("action, expected", [("accept", "for 2 under Ada"), ("decline", "No booking: the person chose decline.")])
def test_an_input_required_result_is_a_card_under_its_request_and_the_answer_goes_back(admin_client, action, expected):
    server = McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                                      protocol_era=MODERN)
    assert services.apply_listing(server, *list_server_tools(demo_config())).ok
    row = book(admin_client, server)
    assert row.kind == "elicitation" and row.asked_during == "tools/call book_table, round 1 of at most 5"
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="server-request-asked-during">Input asked during <code>tools/call book_table, round 1 of at most 5' in page

    fields = {"el__name": "Ada", "el__guests": "2", "el__seating": "outdoor", "el__vegetarian": "on"} if action == "accept" else {}
    respond(admin_client, server, row, action=action, **fields)
    record = result_of(server)
    assert expected in record.summary, record.summary

    scope = protocol_log.server_scope(server.pk)

    def rounds() -> list[tuple[str, str, int]]:
        return list(McpProtocolMessage.objects.filter(scope=scope, method="tools/call").order_by("id")
                    .values_list("sender", "kind", "round"))

    wait_until(lambda: ("server", "response", 1) in rounds(), "the second round's answer in the transcript", 20, details=rounds)
    assert rounds() == [("client", "request", 0), ("server", "input_required", 0), ("client", "request", 1), ("server", "response", 1)]
    second = McpProtocolMessage.objects.filter(scope=scope, method="tools/call", kind="request", round=1).get()
    assert f'"action": "{action}"' in second.body and '"requestState"' in second.body
