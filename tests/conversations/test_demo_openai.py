"""The offline demo agent on OpenAI's wire (providers/demo_openai.py): every OpenAI style runs a
conversation without a key, through the same loop, events and executor; each request the engine
sends it passes the Responses / Chat Completions double's validation (what the real API checks)."""
from __future__ import annotations

import pytest

from playground.engine.wires.base import CHAT_COMPLETIONS_API, RESPONSES_API
from playground.conversations.providers import conversation_provider_key
from playground.conversations.providers.demo_openai import HOSTED_SEARCH_NOTE, OpenAIWireDemoAgent
from playground.conversations.selectors import panel_context
from playground.conversations.testing.fake_openai import InvalidRequest, validate_chat_request, validate_responses_request
from playground.registry.models import PermissionRule
from tests.conversations.conftest import converse, events_of, make_profile

pytestmark = pytest.mark.django_db
TIME = "mcp__time__get_current_time"
# profile wire style → the OpenAI style it runs as (wires.registry.counterpart)
STYLES = {"native": "openai-client", "client": "openai-functions", "server": "openai-hosted"}


class RecordingDemo(OpenAIWireDemoAgent):
    """The demo agent, keeping every request body it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def create(self, request_kwargs, *, api):
        self.bodies.append({"api": api, "body": request_kwargs})
        return super().create(request_kwargs, api=api)


def valid(sent: dict) -> bool:
    """The double accepts the body as a request of the SDK call the loop named (`WireStyle.api`)."""
    try:
        {CHAT_COMPLETIONS_API: validate_chat_request, RESPONSES_API: validate_responses_request}[sent["api"]](sent["body"])
    except InvalidRequest as exc:
        raise AssertionError(f"the double refuses this request: {exc}") from None
    return True


@pytest.fixture(autouse=True)
def no_openai_key(settings):
    settings.OPENAI_API_KEY = ""


@pytest.mark.parametrize("profile_style", list(STYLES))
def test_every_openai_style_searches_loads_and_calls_offline(admin_user, tool_world, profile_style):
    demo = RecordingDemo()
    profile = make_profile(f"openai-{profile_style}", wire_style=profile_style, provider="openai")
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=demo)

    assert outcome.reason == "end_turn"
    assert all(valid(body) for body in demo.bodies)
    turns = events_of(conversation, "turn_started")
    assert {t.payload["wire"] for t in turns} == {STYLES[profile_style]}
    search = events_of(conversation, "toolsearch_query")[0].payload
    assert TIME in search["loaded"]
    assert search["server_side"] is (profile_style == "server")
    assert (search["notes"] == [HOSTED_SEARCH_NOTE]) is (profile_style == "server")
    call = events_of(conversation, "tool_call")[0].payload
    assert call["name"] == TIME and call["arguments"] == {"timezone": "Asia/Tokyo"}
    assert not events_of(conversation, "tool_result")[0].payload["is_error"]
    assert {e.payload["usage_source"] for e in events_of(conversation, "model_response")} == {"estimate"}
    # The hosted style sends no announcement (its namespaces say what is searchable): none is shown.
    assert bool(events_of(conversation, "announcement_sent")) is (profile_style != "server")
    # The loop names the SDK call its wire style is for: the provider never guesses it from the body.
    expected_api = CHAT_COMPLETIONS_API if profile_style == "client" else RESPONSES_API
    assert {sent["api"] for sent in demo.bodies} == {expected_api}
    if profile_style == "client":
        assert "max_completion_tokens" in demo.bodies[0]["body"]  # Chat Completions
    else:
        assert "input" in demo.bodies[0]["body"]
    if profile_style == "native":  # our backend answered: the next request carries its tool_search_output
        output = next(i for i in demo.bodies[1]["body"]["input"] if i["type"] == "tool_search_output")
        assert TIME in [t["name"] for t in output["tools"]]


def test_a_profile_naming_openai_runs_with_the_demo_agent_without_a_key(admin_user, tool_world, settings):
    profile = make_profile("openai-native", provider="openai")
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile)

    assert outcome.reason == "end_turn"
    assert conversation_provider_key(conversation) == "demo-openai"
    assert {e.payload["provider"] for e in events_of(conversation, "model_request")} == {"demo-openai"}
    assert {e.payload["wire"] for e in events_of(conversation, "turn_started")} == {"openai-client"}
    panel = panel_context(conversation, admin_user)
    assert panel["offline"] and "demo" in panel["provider_label"]
    settings.OPENAI_API_KEY = "sk-set"  # with a key the profile's own provider answers
    assert conversation_provider_key(conversation) == "openai"


@pytest.mark.parametrize("profile_style", list(STYLES))
def test_an_ask_rule_pauses_every_openai_style_and_the_answer_runs_the_call(admin_user, tool_world, profile_style):
    from playground.conversations import services
    from tests.conversations.conftest import run_as_the_task

    demo = RecordingDemo()
    profile = make_profile(f"ask-{profile_style}", wire_style=profile_style, provider="openai")
    PermissionRule.objects.create(profile=profile, effect="ask", pattern=TIME)
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=demo)
    assert outcome.reason == "waiting"
    prompt = events_of(conversation, "permission_prompt")[0]
    assert prompt.payload["name"] == TIME

    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user, resume=False)
    outcome = run_as_the_task(conversation.pk, provider=demo, resume_prompt=prompt.sequence)
    conversation.refresh_from_db()
    assert outcome.reason == "end_turn"
    assert not events_of(conversation, "tool_result")[0].payload["is_error"]
    assert all(valid(body) for body in demo.bodies)


@pytest.mark.parametrize("profile_style", list(STYLES))
def test_compaction_carries_what_an_openai_style_search_found(admin_user, tool_world, settings, profile_style):
    demo = RecordingDemo()
    profile = make_profile(f"compact-{profile_style}", wire_style=profile_style, provider="openai")
    conversation, _ = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=demo)
    searches = len(events_of(conversation, "toolsearch_query"))
    settings.COMPACTION_THRESHOLD = 0.0001  # the next turn compacts
    conversation, outcome = converse(admin_user, "What time is it in Paris?", conversation=conversation, provider=demo)

    assert outcome.reason == "end_turn"
    assert TIME in events_of(conversation, "compaction")[0].payload["carried_tools"]
    # The carried tool is loaded after the compaction: called again without a new search.
    assert len(events_of(conversation, "toolsearch_query")) == searches
    last_call = events_of(conversation, "tool_call")[-1].payload
    assert last_call["name"] == TIME and last_call["arguments"] == {"timezone": "Europe/Paris"}
    assert TIME in events_of(conversation, "turn_started")[-1].payload["discovered_tools"]
    assert all(valid(body) for body in demo.bodies)


def test_the_list_filter_finds_a_profile_naming_openai_under_the_provider_that_answers(admin_user, tool_world, settings):
    from playground.conversations import services
    from playground.conversations.models import Conversation
    from playground.conversations.selectors import provider_is

    conversation = services.start_conversation(admin_user, profile=make_profile("openai-profile", provider="openai"))
    assert list(Conversation.objects.filter(provider_is("demo-openai"))) == [conversation]
    assert not Conversation.objects.filter(provider_is("openai")).exists()
    settings.OPENAI_API_KEY = "sk-set"
    assert list(Conversation.objects.filter(provider_is("openai"))) == [conversation]
