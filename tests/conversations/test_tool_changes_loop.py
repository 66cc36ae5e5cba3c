"""The "tool-changes" wire style through the loop: the prediction stored as a system message and shown
like a search, the request accepted by the Messages API double through the real SDK, and the demo agent."""
from __future__ import annotations

import pytest

from django.urls import reverse

from playground.conversations.fragments import render_event_frame
from playground.conversations.models import Message
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from playground.engine.wires.anthropic_tool_changes import TOOL_CHANGES_BETA
from tests.conversations.conftest import converse, event_types, events_of, make_profile

TIME_TOOL = "mcp__time__get_current_time"


def stored_system_messages(conversation) -> list[list[dict]]:
    return list(Message.objects.filter(conversation=conversation, role="system").order_by("position")
                .values_list("content", flat=True))


@pytest.mark.parametrize("keep_search", [False, True])
def test_the_demo_agent_calls_the_predicted_tool_without_a_search(admin_user, admin_client, tool_world, keep_search):
    profile = make_profile(f"changes-{keep_search}", wire_style="tool-changes", tool_changes_search=keep_search)
    conversation, outcome = converse(admin_user, "What is the current time in Tokyo?", profile=profile,
                                     provider=DemoAgentProvider())
    assert outcome.reason == "end_turn", event_types(conversation)
    prediction = events_of(conversation, "toolsearch_query")[0].payload
    assert prediction["predicted"] and TIME_TOOL in prediction["loaded"] and prediction["scored"]
    assert any(s["breakdown"] for s in prediction["scored"])  # the "why" of each score
    assert len(events_of(conversation, "toolsearch_query")) == 1  # no search of the model's
    assert events_of(conversation, "tool_call")[0].payload["name"] == TIME_TOOL
    assert stored_system_messages(conversation)[0] == [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": n}} for n in prediction["loaded"]]
    tools = {t["name"] for t in events_of(conversation, "model_request")[0].payload["request"]["tools"]}
    assert ("ToolSearch" in tools) == keep_search
    # On reload, the same template as live: the prediction with its scores and what it added.
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert "Predicted tools (tool_addition, no search round trip)" in page
    assert f'data-testid="loaded-tool">{TIME_TOOL}' in page
    frame = render_event_frame(conversation, events_of(conversation, "toolsearch_query")[0])
    assert "Predicted tools" in frame and TIME_TOOL in frame
    # Turn 1 counts what its tool_addition sent (no history had discovered it yet): sent, not deferred.
    turn1, turn2 = (e.payload for e in events_of(conversation, "turn_started")[:2])
    assert set(prediction["loaded"]) <= set(turn1["discovered_tools"]) and TIME_TOOL in turn1["loaded_tools"]
    assert TIME_TOOL not in turn1["deferred_tools"] and turn1["deferred_count"] == turn2["deferred_count"]
    assert turn1["tokens"]["sent_tokens"] == turn2["tokens"]["sent_tokens"]


def test_the_real_sdk_sends_the_beta_and_the_tools_array_stays_the_same(admin_user, tool_world, fake_api, claude):
    profile = make_profile("changes-sdk", wire_style="tool-changes")
    fake_api.replies.extend([tool_use_reply(TIME_TOOL, {"timezone": "Asia/Tokyo"}), text_reply("It is noon."),
                             text_reply("You are welcome.")])
    conversation, outcome = converse(admin_user, "What is the current time in Tokyo?", profile=profile, provider=claude)
    assert outcome.reason == "end_turn", [r.error for r in fake_api.message_requests]
    conversation, outcome = converse(admin_user, "thanks", profile=profile, provider=claude, conversation=conversation)
    assert outcome.reason == "end_turn", [r.error for r in fake_api.message_requests]
    requests = fake_api.message_requests
    assert all(r.status == 200 and TOOL_CHANGES_BETA in r.headers["anthropic-beta"] for r in requests)
    assert len({repr(r.body["tools"]) for r in requests}) == 1  # the cached prefix never changes
    first = requests[0].body["messages"]
    assert first[-1]["role"] == "system" and {"type": "tool_addition", "tool": {"type": "tool_reference", "name": TIME_TOOL}} \
        in first[-1]["content"]
    assert events_of(conversation, "tool_result")[0].payload["is_error"] is False


def test_a_denied_tool_is_withdrawn_on_the_next_message(admin_user, tool_world, fake_api, claude):
    from playground.registry.models import PermissionRule

    profile = make_profile("changes-deny", wire_style="tool-changes")
    fake_api.replies.extend([text_reply("ok"), text_reply("ok again")])
    conversation, _ = converse(admin_user, "What is the current time in Tokyo?", profile=profile, provider=claude)
    PermissionRule.objects.create(effect="deny", pattern=TIME_TOOL, profile=profile)
    conversation, outcome = converse(admin_user, "and now?", profile=profile, provider=claude, conversation=conversation)
    assert outcome.reason == "end_turn", [r.error for r in fake_api.message_requests]
    last = fake_api.message_requests[-1].body["messages"][-1]
    assert {"type": "tool_removal", "tool": {"type": "tool_reference", "name": TIME_TOOL}} in last["content"]
    assert events_of(conversation, "toolsearch_query")[-1].payload["removed"] == [TIME_TOOL]


def test_compact_then_call_the_added_tool_keeps_working(admin_user, tool_world, fake_api, claude, settings):
    """The added tool survives a compaction: the boundary carries it and the request after it adds it
    again (after the first message), so the model's call runs without a new prediction or search."""
    profile = make_profile("changes-compact", wire_style="tool-changes", tool_changes_search=False)
    fake_api.replies.extend([tool_use_reply(TIME_TOOL, {"timezone": "Asia/Tokyo"}), text_reply("Noon in Tokyo.")])
    conversation, outcome = converse(admin_user, "What is the current time in Tokyo?", profile=profile, provider=claude)
    assert outcome.reason == "end_turn"
    settings.COMPACTION_THRESHOLD = 0.0001  # the next message's first turn compacts
    fake_api.replies.extend([text_reply("Summary: the time tool was added and called."),
                             tool_use_reply(TIME_TOOL, {"timezone": "UTC"}), text_reply("03:00 UTC.")])
    conversation, outcome = converse(admin_user, "And again please", profile=profile, provider=claude,
                                     conversation=conversation)
    assert outcome.reason == "end_turn", [r.error for r in fake_api.message_requests]
    first_added = events_of(conversation, "toolsearch_query")[0].payload["loaded"]
    assert TIME_TOOL in first_added
    assert events_of(conversation, "compaction")[0].payload["carried_tools"] == first_added
    after = fake_api.message_requests[-2].body  # the request the model answered with the call
    assert after["messages"][1]["role"] == "system" and \
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": TIME_TOOL}} in after["messages"][1]["content"]
    assert [r.payload["is_error"] for r in events_of(conversation, "tool_result")] == [False, False]
    turns = [r.body for r in fake_api.message_requests if r.body.get("tools")]  # not the summary's request
    assert len(turns) == 4 and len({repr(body["tools"]) for body in turns}) == 1  # compaction kept the tools too
