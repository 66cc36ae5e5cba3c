"""The gateway's Protocol view: each session's JSON-RPC transcript as the gateway answered it —
both directions, JSON and SSE answers, both eras (a legacy session by its Mcp-Session-Id, a
2026-07-28 client's requests in its stateless row), the token never in it; admins only."""
from __future__ import annotations

import json

import anyio
import pytest
from django.urls import reverse

from playground.gateway.transcript import GatewayExchange
from playground.mcp_servers import protocol_log
from playground.mcp_servers.models import McpProtocolMessage
from tests.gateway.test_modern_client import MODERN, run_client
from tests.polling import wait_until


@pytest.mark.django_db(transaction=True)
def test_an_exchange_notes_the_request_and_an_sse_answer_in_its_sessions_transcript():
    from playground.gateway.models import GatewaySession
    from playground.registry.models import AgentProfile

    profile = AgentProfile.objects.create(name="p")
    session = GatewaySession.objects.create(session_id="abc123", profile=profile)
    exchange = GatewayExchange(profile.pk, 1, {"mcp-session-id": "abc123", "mcp-protocol-version": "2025-11-25"})
    exchange.request_body(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                      "params": {"name": "echo", "arguments": {"text": "hi"}}}).encode())
    sent = []

    async def send(message):
        sent.append(message)

    watched = exchange.watch(send)

    async def answer():
        await watched({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await watched({"type": "http.response.body", "body": b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress",',
                       "more_body": True})
        await watched({"type": "http.response.body", "body": b'"params":{"progress":1}}\r\n\r\ndata: {"jsonrpc":"2.0","id":3,'
                       b'"error":{"code":-32602,"message":"bad"}}\n\n', "more_body": False})
        await protocol_log.writer().drain()  # what the loop would write within FLUSH_SECONDS

    anyio.run(answer)
    assert len(sent) == 3  # the answer went out whole, as it was
    rows = list(McpProtocolMessage.objects.filter(scope=protocol_log.gateway_scope(session.pk)).order_by("id"))
    assert [(m.sender, m.kind, m.method) for m in rows] == [
        ("client", "request", "tools/call"), ("server", "notification", "notifications/progress"),
        ("server", "error", "tools/call")]
    assert rows[2].error == {"code": -32602, "message": "bad", "name": "Invalid params"}
    assert {m.protocol_version for m in rows} == {"2025-11-25"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_a_live_sessions_transcript_has_both_eras_and_never_the_token(live_gateway, gateway_world, mode, client, admin_user):
    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]

    async def flow(mcp_client):
        await mcp_client.list_tools()
        return await mcp_client.call_tool("ToolSearch", {"query": "select:word_count"})

    found = anyio.run(run_client, live_gateway.endpoint(profile.pk), token, mode, f"transcript-{mode}", flow)
    assert not found.is_error
    session = GatewaySession.objects.get(client_name=f"transcript-{mode}")
    scope = protocol_log.gateway_scope(session.pk)

    def answered() -> bool:
        return McpProtocolMessage.objects.filter(scope=scope, method="tools/call", kind="response").exists()

    wait_until(answered, "the ToolSearch answer in the session's transcript", 20,
               details=lambda: list(McpProtocolMessage.objects.filter(scope=scope).values_list("sender", "kind", "method")))
    rows = list(McpProtocolMessage.objects.filter(scope=scope).order_by("id"))
    methods = [(m.sender, m.kind, m.method) for m in rows]
    assert ("client", "request", "tools/list") in methods and ("server", "response", "tools/list") in methods
    if mode == "legacy":
        assert methods[0] == ("client", "request", "initialize")
        assert {m.protocol_version for m in rows if m.method == "tools/call"} == {session.negotiated_version}
    else:
        assert {m.protocol_version for m in rows if m.method == "tools/call"} == {MODERN}
    assert not any(token in m.body for m in rows)

    client.force_login(admin_user)
    page = client.get(reverse("gateway:session_protocol", args=[session.pk])).content.decode()
    assert "word_count" in page and token not in page
    assert ("2026-07-28 stateless" if mode == MODERN else "legacy session") in page
    assert 'data-testid="protocol-link"' in client.get(reverse("gateway:session_detail", args=[session.pk])).content.decode()
    export = client.get(reverse("gateway:session_protocol_export", args=[session.pk]))
    assert export.status_code == 200 and token not in export.content.decode()
    assert len(json.loads(export.content)["messages"]) == len(rows)


@pytest.mark.django_db
def test_the_session_protocol_is_for_admins_only(client, django_user_model):
    from django.contrib.auth.models import Group

    from playground.gateway.models import GatewaySession
    from playground.registry.models import AgentProfile

    session = GatewaySession.objects.create(session_id="s1", profile=AgentProfile.objects.create(name="p"))
    user = django_user_model.objects.create_user("editor", password="pw")
    user.groups.add(Group.objects.get(name="editor"))
    client.force_login(user)
    assert client.get(reverse("gateway:session_protocol", args=[session.pk])).status_code == 403
    assert client.get(reverse("gateway:session_protocol_export", args=[session.pk])).status_code == 403
