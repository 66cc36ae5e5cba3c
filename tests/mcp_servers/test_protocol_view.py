"""The Protocol view: every JSON-RPC message between our client and a server, captured at the
transport, in order, both eras labelled, MRTR rounds under their request, typed errors, secrets
masked (page and JSON export), bounded per server, admins only."""
from __future__ import annotations

import json
import sys

import pytest
from django.urls import reverse

from playground.mcp_servers import protocol_log
from playground.mcp_servers.connection import ClientHandlers, background_loop, open_connection
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.models import McpProtocolMessage, McpServer
from playground.mcp_servers.secrets import SECRET_MASK
from playground.mcp_servers.transports import ServerConfig
from playground.mcp_servers.wire_capture import CLIENT, SERVER
from tests.mcp_servers.conftest import DEMO_ARGS
from tests.polling import wait_until

pytestmark = [pytest.mark.usefixtures("no_stray_processes")]
MODERN = "2026-07-28"
SECRET = "s3cr3t-token-value-42"


def kinds(scope: str) -> list[tuple[str, str, str, int]]:
    return list(McpProtocolMessage.objects.filter(scope=scope).order_by("id").values_list("sender", "kind", "method", "round"))


def test_mrtr_rounds_are_filed_under_their_first_request():
    grouper = protocol_log.Grouper()
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}
    first = grouper.capture(CLIENT, {"id": 7, "method": "tools/call", "params": {"name": "book_table", **meta}})
    asked = grouper.capture(SERVER, {"id": 7, "result": {"resultType": "input_required", "requestState": "abc",
                                                         "inputRequests": {"a": {"method": "elicitation/create"}}}})
    other = grouper.capture(CLIENT, {"id": 8, "method": "tools/list", "params": meta})
    again = grouper.capture(CLIENT, {"id": 9, "method": "tools/call", "params": {
        "name": "book_table", "requestState": "abc", "inputResponses": {"a": {"action": "decline"}}, **meta}})
    done = grouper.capture(SERVER, {"id": 9, "result": {"content": []}})
    note = grouper.capture(SERVER, {"method": "notifications/tools/list_changed"})
    assert (first.kind, asked.kind, again.kind, done.kind, note.kind) == (
        "request", "input_required", "request", "response", "notification")
    assert first.group == asked.group == again.group == done.group == "client:7" != other.group
    assert (first.round, asked.round, again.round, done.round) == (0, 0, 1, 1)
    assert done.method == "tools/call" and again.protocol_version == done.protocol_version == MODERN


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("era, version", [("legacy", "2025-11-25"), (MODERN, MODERN)])
def test_a_servers_transcript_has_both_directions_its_era_and_no_secret(admin_client, era, version):
    server = McpServer.objects.create(name="demo", command=sys.executable, args=DEMO_ARGS,
                                      env={"DEMO_TOKEN": SECRET}, protocol_era=era)
    outcome, _ = call_registered_tool(server, "mcp__demo__echo", {"text": f"the token is {SECRET}"})
    assert not outcome.is_error
    scope = protocol_log.server_scope(server.pk)
    wait_until(lambda: ("server", "response", "tools/call", 0) in kinds(scope), "the call's answer in the transcript", 20,
               details=lambda: kinds(scope))
    rows = kinds(scope)
    first_method = "initialize" if era == "legacy" else "server/discover"
    assert rows[0] == ("client", "request", first_method, 0) and ("client", "request", "tools/call", 0) in rows
    stored = McpProtocolMessage.objects.filter(scope=scope, method="tools/call")
    assert {m.protocol_version for m in stored} == {version}
    assert all(SECRET not in m.body for m in McpProtocolMessage.objects.filter(scope=scope))
    assert any(SECRET_MASK in m.body for m in stored)

    page = admin_client.get(reverse("mcp_servers:server_protocol", args=[server.pk])).content.decode()
    assert page.count('data-testid="protocol-message"') == len(rows) and SECRET not in page
    assert ("2026-07-28 stateless" if era == MODERN else "legacy session 2025-11-25") in page
    export = admin_client.get(reverse("mcp_servers:server_protocol_export", args=[server.pk]))
    assert export["Content-Disposition"].startswith("attachment") and SECRET not in export.content.decode()
    messages = json.loads(export.content)["messages"]
    call = next(m for m in messages if m["method"] == "tools/call" and m["kind"] == "request")
    assert call["message"]["params"]["arguments"]["text"] == f"the token is {SECRET_MASK}"


@pytest.mark.django_db(transaction=True)
def test_mrtr_rounds_and_a_typed_error_are_shown_under_their_request(admin_client):
    import mcp_types as types

    server = McpServer.objects.create(name="demo", command=sys.executable, args=DEMO_ARGS, protocol_era=MODERN)
    config = ServerConfig.from_server(server)

    async def elicitation(context, params):
        return types.ElicitResult(action="accept", content={"name": "Ada", "guests": 2, "seating": "outdoor", "vegetarian": True})

    async def run():
        async with open_connection(config, handlers=ClientHandlers(elicitation=elicitation),
                                   transcript=protocol_log.transcript_for_server(server.pk, config)) as connection:
            booked = await connection.call_tool("book_table", {"restaurant": "Chez Demo"})
            try:
                await connection.read_resource("demo://nothing-here")
            except Exception:  # noqa: BLE001 - the error answer is what the transcript must show
                pass
            return booked

    booked = background_loop().run(run())
    assert "under Ada" in booked.content[0]["text"]
    scope = protocol_log.server_scope(server.pk)
    calls = list(McpProtocolMessage.objects.filter(scope=scope, method="tools/call").order_by("id"))
    assert [(m.sender, m.kind, m.round) for m in calls] == [
        ("client", "request", 0), ("server", "input_required", 0), ("client", "request", 1), ("server", "response", 1)]
    assert len({m.group for m in calls}) == 1
    assert '"requestState"' in calls[2].body and '"inputResponses"' in calls[2].body
    error = McpProtocolMessage.objects.get(scope=scope, kind="error")
    assert error.method == "resources/read" and error.error["name"] in ("Resource not found", "Invalid params")

    page = admin_client.get(reverse("mcp_servers:server_protocol", args=[server.pk])).content.decode()
    assert 'data-testid="protocol-mrtr">tools/call: 2 rounds' in page
    assert f'data-testid="protocol-error">{error.error["code"]} {error.error["name"]}' in page


@pytest.mark.django_db(transaction=True)
def test_the_transcript_keeps_only_the_newest_messages(settings):
    settings.MCP_PROTOCOL_KEEP_MESSAGES = 6
    server = McpServer.objects.create(name="demo", command=sys.executable, args=DEMO_ARGS)
    for number in range(4):
        outcome, _ = call_registered_tool(server, "mcp__demo__echo", {"text": f"call {number}"})
        assert not outcome.is_error
    scope = protocol_log.server_scope(server.pk)
    wait_until(lambda: any("call 3" in m.body for m in McpProtocolMessage.objects.filter(scope=scope, kind="response")),
               "the last call's answer", 20)
    assert McpProtocolMessage.objects.filter(scope=scope).count() == 6
    assert not McpProtocolMessage.objects.filter(scope=scope, method="initialize").exists()


@pytest.mark.django_db
def test_the_protocol_view_is_for_admins_only(client, django_user_model, admin_user):
    from django.contrib.auth.models import Group

    server = McpServer.objects.create(name="demo", command=sys.executable, args=DEMO_ARGS)
    protocol_log.store(protocol_log.server_scope(server.pk), [protocol_log.Grouper().capture(
        CLIENT, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})], [])
    for role in ("viewer", "operator", "editor"):
        user = django_user_model.objects.create_user(role, password="pw")
        user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
        assert client.get(reverse("mcp_servers:server_protocol", args=[server.pk])).status_code == 403
        assert client.get(reverse("mcp_servers:server_protocol_export", args=[server.pk])).status_code == 403
        assert 'data-testid="protocol-link"' not in client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    client.force_login(admin_user)
    assert 'data-testid="protocol-link"' in client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()


@pytest.mark.django_db
def test_capture_is_off_at_zero(settings):
    settings.MCP_PROTOCOL_KEEP_MESSAGES = 0
    assert protocol_log.transcript_for_server(1, ServerConfig(name="x", transport="stdio", command="x")) is None


@pytest.mark.django_db
def test_the_table_keeps_the_newest_messages_of_all_scopes(settings, monkeypatch):
    settings.MCP_PROTOCOL_KEEP_MESSAGES = 5
    settings.MCP_PROTOCOL_KEEP_TOTAL = 12
    monkeypatch.setattr(protocol_log, "TOTAL_CHECK_EVERY", 4)
    grouper = protocol_log.Grouper()
    for number in range(10):  # ten scopes come and go, three messages each
        protocol_log.store(f"gateway-{number}", [grouper.capture(CLIENT, {"jsonrpc": "2.0", "id": i, "method": "ping"})
                                                 for i in range(3)], [])
    total = McpProtocolMessage.objects.count()
    assert 12 <= total < 12 + 4 + 3  # bounded, checked every few ids
    assert McpProtocolMessage.objects.filter(scope="gateway-9").count() == 3
    assert not McpProtocolMessage.objects.filter(scope="gateway-0").exists()
