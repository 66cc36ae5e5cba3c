"""An image a real MCP tool returns reaches the model as an image block, and the page shows it."""
from __future__ import annotations

import base64
import sys

import pytest
from django.urls import reverse

from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from tests.conversations.conftest import converse, events_of
from tests.mcp_servers.conftest import DEMO_ARGS

BADGE = "mcp__demo__render_badge"


@pytest.fixture
def demo_server(db):
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.services import sync_server
    from playground.mcp_servers.session_pool import session_pool

    server = McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS)
    sync_server(server)
    assert server.tools.filter(name=BADGE).exists()
    yield server
    session_pool().close_all()


def test_a_tool_image_is_sent_to_the_model_and_shown_on_the_page(admin_client, admin_user, demo_server, native_profile,
                                                                  fake_api, claude):
    fake_api.script(
        tool_use_reply("ToolSearch", {"query": f"select:{BADGE}"}),
        tool_use_reply(BADGE, {"color": "blue"}),
        text_reply("A small blue badge."),
    )
    conversation, outcome = converse(admin_user, "Draw me a blue badge", profile=native_profile, provider=claude)

    assert outcome.reason == "end_turn"
    assert [r.status for r in fake_api.message_requests] == [200, 200, 200]  # the API-shaped validation accepted it
    result = fake_api.message_requests[2].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    image = result["content"][0]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")

    shown = events_of(conversation, "tool_result")[-1].payload["content"][0]
    assert shown == image
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="result-image"' in page
    assert f'src="data:image/png;base64,{image["source"]["data"]}"' in page
    assert "[image sent to the model: image/png]" in page
