"""Streaming text: the Messages API double streams SSE, Claude's and the demo agent's text is saved as
coalesced text_delta events before the message, and the page grows (live) or joins (reload) them."""
from __future__ import annotations

import threading
import time

import anthropic
import pytest
from django.urls import reverse

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.fragments import render_event_frame
from playground.conversations.models import Conversation
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply, tool_use_reply
from playground.engine.execution import CallCancelled, CancelSignal
from tests.conversations.conftest import converse, event_types, events_of

LONG = "The forecast for Paris is sunny in the morning, cloudy after noon, and a little rain is likely by the evening."


def test_the_double_streams_a_reply_as_the_real_api_does():
    with FakeMessagesAPI() as api:
        api.script(tool_use_reply("echo", {"text": "hi"}, text=LONG))
        client = anthropic.Anthropic(api_key="sk-test", base_url=api.url, max_retries=0)
        pieces = []
        with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as stream:
            for event in stream:
                if event.type == "text":
                    pieces.append(event.text)
            final = stream.get_final_message()
    assert len(pieces) > 5 and "".join(pieces) == LONG  # a few words per delta, joined back exactly
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"text": "hi"} and final.stop_reason == "tool_use"
    assert final.usage.input_tokens == 100 and final.usage.output_tokens == 20
    assert api.message_requests[0].body["stream"] is True


def test_claude_text_is_saved_as_deltas_before_the_message(admin_user, tool_world, native_profile, settings):
    settings.STREAM_FLUSH_SECONDS = 0  # every piece its own event
    with FakeMessagesAPI() as api:
        from playground.conversations.providers.anthropic_api import AnthropicProvider

        api.script(text_reply(LONG))
        claude = AnthropicProvider(api_key="sk-test", base_url=api.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "Weather in Paris?", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn"
    deltas = events_of(conversation, "text_delta")
    message = events_of(conversation, "message")[-1]
    assert len(deltas) > 5 and "".join(d.payload["text"] for d in deltas) == LONG
    assert [d.payload["offset"] for d in deltas] == [sum(len(x.payload["text"]) for x in deltas[:i]) for i in range(len(deltas))]
    assert all(d.sequence < message.sequence and d.turn_sequence == message.turn_sequence for d in deltas)
    assert message.payload["streamed"] is True and message.payload["text"] == LONG


def test_deltas_are_coalesced(admin_user, tool_world, native_profile, settings):
    """A model streams a few characters at a time; the loop saves the first piece at once, then at
    most one event per STREAM_FLUSH_SECONDS."""
    settings.STREAM_FLUSH_SECONDS = 3600
    with FakeMessagesAPI() as api:
        from playground.conversations.providers.anthropic_api import AnthropicProvider

        api.script(text_reply(LONG))
        claude = AnthropicProvider(api_key="sk-test", base_url=api.url, max_retries=0, timeout=5)
        conversation, _ = converse(admin_user, "Weather in Paris?", profile=native_profile, provider=claude)
    deltas = events_of(conversation, "text_delta")
    assert len(deltas) == 2 and "".join(d.payload["text"] for d in deltas) == LONG


def test_the_demo_agent_streams_its_words_at_its_pace_and_not_at_pace_zero(admin_user, tool_world, native_profile, settings):
    settings.STREAM_FLUSH_SECONDS = 0
    settings.DEMO_STREAM_WORDS_PER_SECOND = 0
    conversation, _ = converse(admin_user, "What is 17 * 23?", profile=native_profile, provider=DemoAgentProvider())
    assert "text_delta" not in event_types(conversation)

    settings.DEMO_STREAM_WORDS_PER_SECOND = 400
    started = time.monotonic()
    conversation, _ = converse(admin_user, "What is 17 * 23?", profile=native_profile, provider=DemoAgentProvider())
    took = time.monotonic() - started
    deltas, messages = events_of(conversation, "text_delta"), events_of(conversation, "message")[1:]
    by_turn = {}
    for delta in deltas:
        by_turn.setdefault(delta.turn_sequence, []).append(delta.payload["text"])
    assert by_turn and all("".join(by_turn[m.turn_sequence]) == m.payload["text"] for m in messages if m.payload.get("streamed"))
    words = sum(len(m.payload["text"].split()) for m in messages)
    assert len(deltas) >= words - 1 and took >= (words - 2) / 400  # one word per piece, paced


def test_the_demo_agents_pace_is_capped_per_reply(settings):
    settings.DEMO_STREAM_WORDS_PER_SECOND = 1  # a second a word …
    settings.DEMO_STREAM_MAX_SECONDS = 0.3  # … but no reply takes longer than this
    provider = DemoAgentProvider()
    pieces: list[str] = []
    started = time.monotonic()
    response = provider.stream_or_cancel({"messages": [{"role": "user", "content": "hello there"}], "tools": []}, CancelSignal(), pieces.append)
    assert time.monotonic() - started < 2 and "".join(pieces) == response.content[0]["text"] and len(pieces) > 3


def test_a_cancel_stops_the_demo_agent_mid_sentence(settings):
    settings.DEMO_STREAM_WORDS_PER_SECOND = 2
    settings.DEMO_STREAM_MAX_SECONDS = 60
    cancel, pieces = CancelSignal(), []
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(CallCancelled):
        DemoAgentProvider().stream_or_cancel({"messages": [{"role": "user", "content": "hello there"}], "tools": []}, cancel, pieces.append)
    assert time.monotonic() - started < 2 and 1 <= len(pieces) <= 3


@pytest.mark.django_db
def test_the_page_grows_the_reply_live_and_joins_it_on_reload(admin_client, admin_user):
    conversation = Conversation.objects.create(owner=admin_user)
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native"))
    first = record_event(conversation, ev.TextDelta(text="Sunny in ", offset=0), turn_sequence=turn.sequence)
    second = record_event(conversation, ev.TextDelta(text="Paris", offset=9), turn_sequence=turn.sequence)
    bubble, text = f"stream-{conversation.pk}-{turn.sequence}", f"stream-text-{conversation.pk}-{turn.sequence}"

    # Live: the first piece opens an assistant bubble in the chat, the next ones are appended to its text.
    assert f'id="{bubble}"' in render_event_frame(conversation, first) and "Sunny in" in render_event_frame(conversation, first)
    frame = render_event_frame(conversation, second)
    assert f'hx-swap-oob="beforeend:#{text}">Paris</span>' in frame and 'data-event-type="text_delta"' not in frame
    # Not in the timeline: the message says it all once saved.
    assert f'id="turn-body-{conversation.pk}-{turn.sequence}"' not in frame

    # Reload while it is being written: one bubble holding everything so far.
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert page.count('data-testid="chat-streaming"') == 1 and "Sunny in Paris</div>" in page

    # The message replaces the bubble, live and on reload.
    message = record_event(conversation, ev.ChatMessage(role="assistant", text="Sunny in Paris.", streamed=True),
                           turn_sequence=turn.sequence)
    assert f'<div id="{bubble}" hx-swap-oob="delete"></div>' in render_event_frame(conversation, message)
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="chat-streaming"' not in page and "Sunny in Paris." in page


def test_a_task_runs_conversation_does_not_stream(admin_user, tool_world, native_profile, settings):
    """Nobody reads a task run's conversation as it is written: the demo agent's pace would only lengthen the run."""
    from playground.agenteval.models import Task, TaskRun, TaskRunItem, TaskSet
    from playground.conversations import services

    settings.DEMO_STREAM_WORDS_PER_SECOND = 400
    settings.STREAM_FLUSH_SECONDS = 0
    task_set = TaskSet.objects.create(name="streaming", source=TaskSet.Source.UPLOAD)
    task = Task.objects.create(task_set=task_set, external_id="t1", query="What is 17 * 23?")
    run = TaskRun.objects.create(task_set=task_set, profiles=[{"id": native_profile.pk, "name": native_profile.name}])
    conversation = services.start_conversation(admin_user, profile=native_profile)
    TaskRunItem.objects.create(run=run, task=task, profile=native_profile, profile_name=native_profile.name, conversation=conversation)
    conversation, outcome = converse(admin_user, "What is 17 * 23?", conversation=conversation, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn" and "message" in event_types(conversation)
    assert "text_delta" not in event_types(conversation)
