"""The third mode: Anthropic's server-side search tool, its blocks passed back unchanged."""
from __future__ import annotations

from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.testing.fake_api import server_search_reply, text_reply
from tests.conversations.conftest import converse, events_of, make_profile

TIME = "mcp__time__get_current_time"


def test_every_deferred_tool_goes_with_defer_loading_and_server_blocks_round_trip(admin_user, tool_world, fake_api, claude):
    profile = make_profile("server", wire_style="server")
    use = {"type": "tool_use", "id": "toolu_after_search", "name": TIME, "input": {"timezone": "Asia/Tokyo"}}
    fake_api.script(server_search_reply("time", [TIME], then=[use]), text_reply("Noon."))
    conversation, outcome = converse(admin_user, "time in Tokyo?", profile=profile, provider=claude)

    assert outcome.reason == "end_turn", [r.error for r in fake_api.requests]
    first, second = fake_api.message_requests
    tools = {t["name"]: t for t in first.body["tools"]}
    assert tools["tool_search_tool_bm25"]["type"] == "tool_search_tool_bm25_20251119"
    assert "ToolSearch" not in tools
    deferred = [n for n, t in tools.items() if t.get("defer_loading")]
    assert set(deferred) == {TIME, "mcp__github__create_issue", "mcp__slack__post_message", "mcp__weather__get_forecast"}
    assistant = second.body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    assert second.body["messages"][2]["content"][0]["tool_use_id"] == "toolu_after_search"
    search = events_of(conversation, "toolsearch_query")[0].payload
    assert search["server_side"] is True and search["loaded"] == [TIME]
    assert events_of(conversation, "tool_result")[0].payload["is_error"] is False
    assert events_of(conversation, "turn_started")[0].payload["server_search"] == "bm25"
    # the server's search, then a call of what it found: learned like our own ToolSearch's
    from playground.conversations.models import ToolSearchUsage

    assert list(ToolSearchUsage.objects.values_list("query", "tool_name")) == [("time", TIME)]


def test_the_demo_agent_refuses_the_server_mode_with_a_clear_error(admin_user, tool_world):
    profile = make_profile("server", wire_style="server")
    conversation, outcome = converse(admin_user, "time in Tokyo?", profile=profile, provider=DemoAgentProvider())
    assert outcome.reason == "error"
    assert "cannot run Anthropic's server-side search" in events_of(conversation, "error")[0].payload["message"]
