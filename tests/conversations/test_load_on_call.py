"""A deferred tool called before a search loaded it: by default the error naming `select:<tool>`;
with the profile's "load on call" the tool is loaded instead (a ToolSearch event with a note) and the
model's second call runs — in every wire style where a model can make that mistake, through the
real SDK against its API double (which refuses what the real API refuses). OpenAI's tool_search
styles load a function only through a search's output: there the error stays."""
from __future__ import annotations

import pytest

from playground.conversations.providers.openai_api import OpenAIProvider
from playground.conversations.testing import fake_api as anthropic_double
from playground.conversations.testing import fake_openai as openai_double
from playground.engine.agent_measures import measure_task
from tests.conversations.conftest import converse, events_of, make_profile

pytestmark = pytest.mark.django_db
TIME = "mcp__time__get_current_time"
TOKYO = {"timezone": "Asia/Tokyo"}
STYLES = {"anthropic-native": ("native", "anthropic"), "anthropic-client": ("client", "anthropic"),
          "openai-client": ("native", "openai"), "openai-functions": ("client", "openai")}


def script(vendor: str, style: str) -> list:
    if vendor == "anthropic":
        return [anthropic_double.tool_use_reply(TIME, TOKYO), anthropic_double.tool_use_reply(TIME, TOKYO),
                anthropic_double.text_reply("It is noon in Tokyo.")]
    if style == "openai-functions":
        return [openai_double.chat_reply(tool_calls=[(TIME, TOKYO)]), openai_double.chat_reply(tool_calls=[(TIME, TOKYO)]),
                openai_double.chat_reply("It is noon in Tokyo.")]
    return [openai_double.response_reply([openai_double.function_call_item(TIME, TOKYO)]),
            openai_double.response_reply([openai_double.function_call_item(TIME, TOKYO)]),
            openai_double.response_reply([openai_double.message_item("It is noon in Tokyo.")])]


def provider_for(vendor: str, double):
    if vendor == "anthropic":
        from playground.conversations.providers.anthropic_api import AnthropicProvider

        return AnthropicProvider(api_key="sk-test", base_url=double.url, max_retries=1, timeout=10)
    return OpenAIProvider(api_key="sk-test", base_url=double.url, model="gpt-test", max_retries=1, timeout=10)


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("load_on_call", [False, True])
def test_a_deferred_tool_called_before_its_search(style, load_on_call, admin_user, tool_world):
    profile_style, vendor = STYLES[style]
    profile = make_profile(f"{style} {load_on_call}", wire_style=profile_style, load_on_call=load_on_call)
    double = anthropic_double.FakeMessagesAPI() if vendor == "anthropic" else openai_double.FakeOpenAIAPI()
    with double:
        double.script(*script(vendor, style))
        conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=provider_for(vendor, double))
        assert outcome.reason == "end_turn", [r.error for r in double.requests]
        assert all(r.status == 200 for r in double.requests), [r.error for r in double.requests]
    results = [e.payload for e in events_of(conversation, "tool_result")]
    first = results[0]
    assert first["is_error"] and "before it was loaded" in first["error"]
    if not load_on_call or style == "openai-client":
        # openai-client loads a function only through a tool_search_output: the option does not apply there.
        # Claude Code's answer: the error names select:<tool>, and nothing was loaded, so the second call fails too.
        assert f"select:{TIME}" in first["content"][0]["text"] and results[1]["is_error"]
        assert events_of(conversation, "toolsearch_query") == []
        return
    search = events_of(conversation, "toolsearch_query")[0].payload
    assert search["query"] == f"select:{TIME}" and search["loaded"] == [TIME] and "loaded on call" in search["notes"][0]
    assert not results[1]["is_error"]  # the second call ran: the tool was loaded in the request after
    later = [e.payload for e in events_of(conversation, "turn_started")][1:]
    assert all(TIME in turn["loaded_tools"] for turn in later)
    # The task's measures: the first call did not run (not loaded), the gold tool answered after.
    measures = measure_task([(e.type, e.payload) for e in conversation.events.order_by("sequence")], [TIME])
    assert measures.success and not measures.first_call_success and measures.errors == {"tool_not_loaded": 1}
