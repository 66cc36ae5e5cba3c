"""Learning from usage in conversations: a run's searches and calls are recorded, and later
searches score them (the tool's "usage" field)."""
from __future__ import annotations

import pytest

from playground.conversations.models import Conversation, ToolSearchUsage
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.usage import record_usage, usage_log
from tests.conversations.conftest import converse, events_of, make_profile

FORECAST = "mcp__weather__get_forecast"


@pytest.fixture
def learner(db):
    return make_profile("learner", search_backend="bm25")


def test_a_search_followed_by_a_call_is_learned_and_scored_by_the_next_search(admin_user, tool_world, learner):
    conversation, outcome = converse(admin_user, "What is the weather forecast for Paris?", profile=learner, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn"
    search = events_of(conversation, "toolsearch_query")[0].payload
    assert FORECAST in search["loaded"] and events_of(conversation, "tool_call")[0].payload["name"] == FORECAST
    assert list(ToolSearchUsage.objects.values_list("query", "tool_name")) == [(search["query"], FORECAST)]
    assert usage_log().for_tool(FORECAST) == (search["query"],)

    # A later conversation asks in words the tool's own text lacks but the learned query has.
    later, _ = converse(admin_user, "Paris outlook please", profile=learner, provider=DemoAgentProvider())
    scored = events_of(later, "toolsearch_query")[0].payload["scored"]
    assert scored and scored[0]["name"] == FORECAST
    learned = [c for c in scored[0]["breakdown"] if c["field"] == "usage"]
    assert [c["term"] for c in learned] == ["paris"] and "past searches" in learned[0]["detail"]


def test_recording_twice_keeps_one_row_and_deleting_the_conversation_forgets(admin_user, tool_world, learner):
    conversation, _ = converse(admin_user, "What is the weather forecast for Paris?", profile=learner, provider=DemoAgentProvider())
    messages = [{"role": m.role, "content": m.content} for m in conversation.messages.order_by("position")]
    assert record_usage(conversation.pk, messages) == 1
    assert ToolSearchUsage.objects.count() == 1
    Conversation.objects.filter(pk=conversation.pk).delete()
    assert not ToolSearchUsage.objects.exists() and usage_log() is None


def test_learning_can_be_turned_off(admin_user, tool_world, learner, settings):
    settings.TOOLSEARCH_LEARN_FROM_USAGE = False
    converse(admin_user, "What is the weather forecast for Paris?", profile=learner, provider=DemoAgentProvider())
    assert not ToolSearchUsage.objects.exists() and usage_log() is None


def test_a_failure_to_record_does_not_fail_the_run(admin_user, tool_world, learner, monkeypatch, caplog):
    from playground.conversations import usage

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(usage, "record_usage", broken)
    conversation, outcome = converse(admin_user, "What is the weather forecast for Paris?", profile=learner, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn" and conversation.status == Conversation.Status.IDLE
    assert "could not record ToolSearch usage" in caplog.text


TIME = "mcp__time__get_current_time"


def test_a_subagents_searches_teach_too(admin_user, tool_world, native_profile, fake_api, claude):
    from playground.conversations.testing.fake_api import text_reply, tool_use_reply

    fake_api.script(
        tool_use_reply("Agent", {"description": "find time", "prompt": "What time is it in Tokyo?"}),
        tool_use_reply("ToolSearch", {"query": "current time in a timezone"}),
        tool_use_reply(TIME, {"timezone": "Asia/Tokyo"}),
        text_reply("Tokyo: noon."),
        text_reply("The subagent says: noon."),
    )
    conversation, outcome = converse(admin_user, "Ask a helper for the time in Tokyo", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn"
    assert list(ToolSearchUsage.objects.values_list("conversation", "query", "tool_name")) == [
        (conversation.pk, "current time in a timezone", TIME)]


def test_a_search_before_a_compaction_still_teaches_the_call_after_it(admin_user, tool_world, native_profile, fake_api, claude,
                                                                      settings):
    from playground.conversations.testing.fake_api import text_reply, tool_use_reply

    fake_api.script(tool_use_reply("ToolSearch", {"query": "clock timezone"}), text_reply("Found a time tool."))
    conversation, _ = converse(admin_user, "find a time tool", profile=native_profile, provider=claude)
    assert not ToolSearchUsage.objects.exists()  # found, not used yet
    settings.COMPACTION_THRESHOLD = 0.0001  # the next turn compacts the search away
    fake_api.script(text_reply("Summary: a time tool was found."), tool_use_reply(TIME, {"timezone": "UTC"}), text_reply("Noon UTC."))
    conversation, outcome = converse(admin_user, "now call it", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn" and events_of(conversation, "compaction")
    assert list(ToolSearchUsage.objects.values_list("query", "tool_name")) == [("clock timezone", TIME)]


def test_an_admin_removes_one_misleading_search_in_the_django_admin(admin_client, admin_user, tool_world, learner):
    from django.urls import reverse

    converse(admin_user, "What is the weather forecast for Paris?", profile=learner, provider=DemoAgentProvider())
    row = ToolSearchUsage.objects.get()
    listing = admin_client.get(reverse("admin:conversations_toolsearchusage_changelist"))
    assert listing.status_code == 200 and row.query in listing.content.decode()
    assert admin_client.get(reverse("admin:conversations_toolsearchusage_add")).status_code == 403
    admin_client.post(reverse("admin:conversations_toolsearchusage_delete", args=[row.pk]), {"post": "yes"})
    assert not ToolSearchUsage.objects.exists() and usage_log() is None
