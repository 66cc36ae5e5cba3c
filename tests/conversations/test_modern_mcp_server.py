"""A server that speaks only the stateless 2026-07-28 protocol (the SDK's stateless HTTP manager,
`initialize` refused) registers, syncs and is called from a conversation."""
from __future__ import annotations

import pytest

from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from tests.conversations.conftest import converse, events_of
from tests.mcp_servers.test_protocol_eras import StatelessModernServer

ADD = "mcp__modern__add"


@pytest.fixture(scope="module")
def modern_only_http():
    server = StatelessModernServer()
    yield server
    server.stop()


@pytest.fixture
def modern_server(db, modern_only_http):
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.services import sync_server
    from playground.mcp_servers.session_pool import session_pool

    server = McpServer.objects.create(name="modern", transport="http", url=modern_only_http.url, protocol_era="auto")
    result = sync_server(server)
    assert result.ok, result.error
    server.refresh_from_db()
    assert server.negotiated_version == "2026-07-28" and server.tools.filter(name=ADD).exists()
    yield server
    session_pool().close_all()


def test_a_conversation_calls_a_tool_of_a_stateless_modern_only_server(admin_user, modern_server, native_profile,
                                                                       fake_api, claude):
    fake_api.script(
        tool_use_reply("ToolSearch", {"query": f"select:{ADD}"}),
        tool_use_reply(ADD, {"a": 20, "b": 22}),
        text_reply("It is 42."),
    )
    conversation, outcome = converse(admin_user, "Add 20 and 22", profile=native_profile, provider=claude)

    assert outcome.reason == "end_turn"
    result = fake_api.message_requests[2].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert "42" in str(result["content"])
    assert any(e.payload.get("name") == ADD for e in events_of(conversation, "tool_call"))
