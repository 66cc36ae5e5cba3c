from __future__ import annotations

from playground.conversations.providers.demo import DemoAgentProvider
from tests.conversations.conftest import converse, event_types, events_of


def test_demo_agent_searches_loads_calls_and_answers(admin_user, tool_world, native_profile):
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=native_profile, provider=DemoAgentProvider())
    types = event_types(conversation)
    print(types)
    assert outcome.reason == "end_turn", types
