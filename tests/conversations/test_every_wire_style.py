"""Every wire style, both vendors, end to end through the real SDK against its API double (which
refuses what the real API refuses): a search loads a deferred tool, the call asks a person, the
approved call runs, and after a compaction the carried tool is called again without a search."""
from __future__ import annotations

import pytest

from playground.conversations import services
from playground.conversations.providers.openai_api import OpenAIProvider
from playground.conversations.testing import fake_api as anthropic_double
from playground.conversations.testing import fake_openai as openai_double
from playground.registry.models import PermissionRule
from tests.conversations.conftest import converse, events_of, make_profile, run_as_the_task

pytestmark = pytest.mark.django_db
TIME = "mcp__time__get_current_time"
TOKYO, UTC = {"timezone": "Asia/Tokyo"}, {"timezone": "UTC"}


def anthropic_script(style: str) -> tuple[list, list]:
    """(first message's replies, second message's replies: the summary first) for an Anthropic style."""
    call = {"type": "tool_use", "id": "toolu_time_1", "name": TIME, "input": TOKYO}
    if style == "server":
        first = [anthropic_double.server_search_reply("time", [TIME], then=[call])]
    else:
        first = [anthropic_double.tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}),
                 anthropic_double.tool_use_reply(TIME, TOKYO)]
    return ([*first, anthropic_double.text_reply("It is noon in Tokyo.")],
            [anthropic_double.text_reply("Summary: the time tool was loaded and called."),
             anthropic_double.tool_use_reply(TIME, UTC), anthropic_double.text_reply("It is 03:00 UTC.")])


def openai_script(style: str) -> tuple[list, list]:
    summary = openai_double.chat_reply("Summary: the time tool was loaded and called.")  # the provider summarises over Chat Completions
    if style == "openai-functions":
        return ([openai_double.chat_reply(tool_calls=[("ToolSearch", {"query": f"select:{TIME}"})]),
                 openai_double.chat_reply(tool_calls=[(TIME, TOKYO)]), openai_double.chat_reply("It is noon in Tokyo.")],
                [summary, openai_double.chat_reply(tool_calls=[(TIME, UTC)]), openai_double.chat_reply("It is 03:00 UTC.")])
    if style == "openai-hosted":
        search = [openai_double.hosted_search_reply("time", [TIME], then=[
            openai_double.function_call_item("get_current_time", TOKYO, namespace="mcp__time")])]
        again = openai_double.function_call_item("get_current_time", UTC, namespace="mcp__time")
    else:
        search = [openai_double.response_reply([openai_double.tool_search_call_item({"query": f"select:{TIME}"})]),
                  openai_double.response_reply([openai_double.function_call_item(TIME, TOKYO)])]
        again = openai_double.function_call_item(TIME, UTC)
    return ([*search, openai_double.response_reply([openai_double.message_item("It is noon in Tokyo.")])],
            [summary, openai_double.response_reply([again]),
             openai_double.response_reply([openai_double.message_item("It is 03:00 UTC.")])])


# The six styles, as `toolsearch request` names them: (the profile's wire style, the vendor).
STYLES = {
    "anthropic-native": ("native", "anthropic"), "anthropic-client": ("client", "anthropic"),
    "anthropic-server": ("server", "anthropic"), "openai-client": ("native", "openai"),
    "openai-functions": ("client", "openai"), "openai-hosted": ("server", "openai"),
}


@pytest.mark.parametrize("style", list(STYLES))
def test_a_conversation_in_every_wire_style(style, admin_user, tool_world, settings):
    profile_style, vendor = STYLES[style]
    profile = make_profile(style, wire_style=profile_style)
    PermissionRule.objects.create(profile=profile, effect="ask", pattern=TIME)
    double = anthropic_double.FakeMessagesAPI() if vendor == "anthropic" else openai_double.FakeOpenAIAPI()
    with double:
        if vendor == "anthropic":
            from playground.conversations.providers.anthropic_api import AnthropicProvider

            provider = AnthropicProvider(api_key="sk-test", base_url=double.url, max_retries=1, timeout=10)
            first, second = anthropic_script(profile_style)
        else:
            provider = OpenAIProvider(api_key="sk-test", base_url=double.url, model="gpt-test", max_retries=1, timeout=10)
            first, second = openai_script(style)
        double.script(*first)
        conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=provider)
        assert outcome.reason == "waiting", [r.error for r in double.requests]
        prompt = events_of(conversation, "permission_prompt")[0]
        assert prompt.payload["name"] == TIME
        services.answer_permission(conversation, prompt.sequence, "always", user=admin_user, resume=False)
        assert run_as_the_task(conversation.pk, provider=provider, resume_prompt=prompt.sequence).reason == "end_turn"

        settings.COMPACTION_THRESHOLD = 0.0001  # the second message's first turn compacts
        double.script(*second)
        conversation, outcome = converse(admin_user, "And in UTC?", conversation=conversation, provider=provider)
        assert outcome.reason == "end_turn", [r.error for r in double.requests]
        assert all(r.status == 200 for r in double.requests), [r.error for r in double.requests]

    assert {e.payload["wire"] for e in events_of(conversation, "turn_started")} == {
        style.removeprefix("anthropic-") if vendor == "anthropic" else style}
    searches = events_of(conversation, "toolsearch_query")
    assert len(searches) == 1 and searches[0].payload["loaded"] == [TIME]  # one search, before the compaction
    assert searches[0].payload["server_side"] is (profile_style == "server")
    assert events_of(conversation, "compaction")[0].payload["carried_tools"] == [TIME]
    # Compact, then call: the request after the compaction carried the discovered tool's definition.
    compaction = events_of(conversation, "compaction")[0].sequence
    after = [e.payload for e in events_of(conversation, "turn_started") if e.sequence > compaction]
    assert after and all(TIME in turn["loaded_tools"] for turn in after)
    calls = [e.payload for e in events_of(conversation, "tool_call")]
    assert [(c["name"], c["arguments"]) for c in calls] == [(TIME, TOKYO), (TIME, UTC)]
    assert [r.payload["is_error"] for r in events_of(conversation, "tool_result")] == [False, False]
    assert len(events_of(conversation, "permission_prompt")) == 1  # "always": the second call did not ask
    assert {e.payload["usage_source"] for e in events_of(conversation, "model_response")} == {"reported"}
