"""record_event: per-conversation sequence numbers, saved before they are broadcast."""
from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event


@pytest.fixture
def conversation(db, admin_user):
    return Conversation.objects.create(owner=admin_user)


def test_it_numbers_events_per_conversation(conversation, admin_user):
    other = Conversation.objects.create(owner=admin_user)
    first = record_event(conversation, ev.ChatMessage(role="user", text="a"))
    second = record_event(conversation, ev.StatusChanged(status="running"))
    elsewhere = record_event(other, ev.ChatMessage(role="user", text="b"))
    assert (first.sequence, second.sequence, elsewhere.sequence) == (1, 2, 1)
    conversation.refresh_from_db()
    assert conversation.next_sequence == 3
    assert first.payload == {"role": "user", "text": "a", "author": ""}


def test_it_sets_the_status_in_the_same_transaction(conversation):
    record_event(conversation, ev.StatusChanged(status="waiting"), status=Conversation.Status.WAITING)
    assert Conversation.objects.get(pk=conversation.pk).status == "waiting"
    assert conversation.status == "waiting"


def test_it_refuses_an_unknown_event_type(conversation):
    class Bogus(ev.LoopEvent):
        type = "bogus"

    with pytest.raises(ValueError, match="unknown event type"):
        record_event(conversation, Bogus())


def test_it_broadcasts_only_after_commit(conversation, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(ev, "broadcast_event", lambda conversation_id, sequence, **_: sent.append((conversation_id, sequence)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        record_event(conversation, ev.ChatMessage(role="user", text="a"))
        assert sent == []
    assert len(callbacks) == 1
    callbacks[0]()
    assert sent == [(conversation.pk, 1)]


def test_every_event_type_is_registered_and_serialisable():
    import json

    assert set(ev.EVENT_TYPES) >= {
        "turn_started", "announcement_sent", "model_request", "model_response", "toolsearch_query", "tool_call",
        "tool_result", "permission_prompt", "permission_answer", "compaction", "error", "turn_finished", "message",
    }
    assert json.dumps(ev.TurnStarted(turn=1, provider="demo", model="m", wire="native").to_payload())


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_distinct_consecutive_sequences(admin_user, monkeypatch):
    monkeypatch.setattr(ev, "broadcast_event", lambda *args, **kwargs: None)
    conversation = Conversation.objects.create(owner=admin_user)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                record_event(conversation.pk, ev.ChatMessage(role="user", text=f"{n}-{i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    sequences = sorted(Event.objects.filter(conversation=conversation).values_list("sequence", flat=True))
    assert sequences == list(range(1, 41))


def test_a_turn_of_a_huge_catalog_keeps_its_payload_small_with_the_full_counts():
    names = [f"mcp__server{i // 100}__tool_number_{i}" for i in range(100_000)]
    turn = ev.TurnStarted(turn=1, provider="demo", model="m", wire="native", loaded_tools=["Read", "ToolSearch"],
                          deferred_tools=names)
    payload = turn.to_payload()
    assert (payload["deferred_count"], payload["loaded_count"]) == (100_000, 2)
    assert payload["deferred_tools"] == names[:ev.NAMES_KEPT]
    assert len(json.dumps(payload)) < ev.MAX_PAYLOAD_BYTES
    announcement = ev.AnnouncementSent(style="full", text="\n".join(names), added=names)
    payload = announcement.to_payload()
    assert payload["text_chars"] == len("\n".join(names)) and len(payload["text"]) < ev.TEXT_KEPT + 200
    assert len(json.dumps(payload)) < ev.MAX_PAYLOAD_BYTES


def test_any_event_over_the_limit_is_stored_bounded_and_marked(conversation):
    huge = ev.ToolResult(**{**TOOL_RESULT_FIELDS, "content": [{"type": "text", "text": "x" * 3_000_000}]})
    row = ev.record_event(conversation, huge)
    assert row.payload["truncated"] is True and len(json.dumps(row.payload)) <= ev.MAX_PAYLOAD_BYTES
    assert row.payload["content"][0]["text"].startswith("xxx") and "more characters not stored" in row.payload["content"][0]["text"]
    small = ev.record_event(conversation, ev.ToolResult(**TOOL_RESULT_FIELDS))
    assert "truncated" not in small.payload


TOOL_RESULT_FIELDS = {"tool_use_id": "toolu_1", "name": "echo", "content": [{"type": "text", "text": "ok"}]}
