"""Runs no worker took (requeue.py, lost_tasks.py): handed over again when the broker lost their task, then failed.

The broker is asked through `lost_tasks.messages_the_broker_holds`; here it is replaced by a set of
run tokens, and the queueing of tasks by a list (the real Redis restart is in test_broker_restart.py).
"""
from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from playground import lost_tasks
from playground.conversations import requeue, services, tasks
from playground.conversations.events import ChatMessage, record_event
from playground.conversations.lease import RunLease
from playground.conversations.models import Conversation, Message
from tests.conversations.conftest import events_of
from tests.lost_task_fakes import GRACE, queue_settings  # noqa: F401 (autouse fixture)


@pytest.fixture
def sent(monkeypatch):
    """The tasks handed to the broker: ("run", id, token) and ("resume", id, token, prompt)."""
    queued: list[tuple] = []
    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, token="": queued.append(("run", pk, token)))
    monkeypatch.setattr(tasks.resume_conversation_task, "delay",
                        lambda pk, token, prompt: queued.append(("resume", pk, token, prompt)))
    return queued


@pytest.fixture
def broker(monkeypatch):
    """The run tokens the broker holds (a set the test fills)."""
    held: set[str] = set()
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds",
                        lambda url, queue, grace: [("conversations.run_conversation", [0, token]) for token in held])
    return held


def one_round(missing: dict) -> tuple[dict[str, int], dict]:
    return lost_tasks.lost_round(missing, [requeue.RUNS])


def queued(user, *, age: float) -> Conversation:
    """A conversation whose run was queued `age` seconds ago and that no worker claimed."""
    conversation = services.start_conversation(user)
    services.send_message(conversation, "hi", user=user, enqueue=False)
    Conversation.objects.filter(pk=conversation.pk).update(queued_at=timezone.now() - timedelta(seconds=age))
    conversation.refresh_from_db()
    return conversation


def two_rounds() -> dict[str, int]:
    _, missing = one_round({})
    outcome, _ = one_round(missing)
    return outcome


def test_a_run_whose_task_the_broker_lost_is_handed_over_again_under_a_new_token(
        viewer_user, sent, broker, django_capture_on_commit_callbacks):
    conversation = queued(viewer_user, age=GRACE + 5)
    old_token = conversation.run_token
    with django_capture_on_commit_callbacks(execute=True):
        first, missing = one_round({})
        assert first == {"requeued": 0, "failed": 0} and missing == {("conversation", conversation.pk): old_token}  # seen once: may be starting
        second, _ = one_round(missing)
    assert second == {"requeued": 1, "failed": 0}
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.RUNNING and conversation.queue_attempts == 1
    assert conversation.run_token not in ("", old_token)
    assert timezone.now() - conversation.queued_at < timedelta(seconds=5)  # the next grace counts from the re-send
    assert sent == [("run", conversation.pk, conversation.run_token)]
    note = events_of(conversation, "status")[-1].payload["note"]
    assert "handed to a worker again (1 of 2)" in note and "was Redis restarted?" in note
    # The lost task, should it turn up after all, finds its token gone and claims nothing.
    with RunLease(conversation.pk, old_token, interval=3600) as lease:
        assert not lease.claimed


def test_a_task_the_broker_holds_or_a_young_or_claimed_run_is_left_alone(viewer_user, sent, broker):
    waiting = queued(viewer_user, age=GRACE + 60)
    broker.add(waiting.run_token)  # still in the queue: only waiting for a free worker
    young = queued(viewer_user, age=GRACE - 5)
    claimed = queued(viewer_user, age=GRACE + 60)
    Conversation.objects.filter(pk=claimed.pk).update(heartbeat_at=timezone.now())
    assert two_rounds() == {"requeued": 0, "failed": 0}
    assert sent == []
    for conversation in (waiting, young, claimed):
        assert Conversation.objects.get(pk=conversation.pk).run_token == conversation.run_token


def test_a_run_claimed_between_two_rounds_is_not_handed_over(viewer_user, sent, broker):
    conversation = queued(viewer_user, age=GRACE + 5)
    _, missing = one_round({})
    with RunLease(conversation.pk, conversation.run_token, interval=3600) as lease:
        assert lease.claimed
        outcome, _ = one_round(missing)
    assert outcome == {"requeued": 0, "failed": 0} and sent == []


def test_the_grace_counts_from_the_request_not_from_later_events(viewer_user, sent, broker):
    conversation = queued(viewer_user, age=GRACE + 5)
    # Something happens in the conversation after the request (here: an event recorded just now).
    record_event(conversation.pk, ChatMessage(role="assistant", text="a later event"))
    assert two_rounds()["requeued"] == 1


def test_after_the_last_attempt_the_run_fails_with_a_reason_and_the_conversation_takes_messages(
        viewer_user, sent, broker, django_capture_on_commit_callbacks):
    conversation = queued(viewer_user, age=GRACE + 5)
    Conversation.objects.filter(pk=conversation.pk).update(queue_attempts=2)
    with django_capture_on_commit_callbacks(execute=True):
        assert two_rounds() == {"requeued": 0, "failed": 1}
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED and conversation.run_token == "" and sent == []
    error = events_of(conversation, "error")[-1].payload
    assert error["kind"] == "queue_lost"
    assert "No worker started this run" in error["message"] and "handed over again 2 time(s)" in error["message"]
    assert "Send the message again" in error["message"]
    services.send_message(conversation, "again", user=viewer_user, enqueue=False)
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.RUNNING


def test_a_resumption_the_broker_lost_is_sent_again_as_a_resumption(
        viewer_user, sent, broker, django_capture_on_commit_callbacks):
    conversation = queued(viewer_user, age=GRACE + 5)
    state = {"prompt_sequence": 7, "tool_uses": [{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}],
             "results": []}
    Conversation.objects.filter(pk=conversation.pk).update(paused_run=state)
    with django_capture_on_commit_callbacks(execute=True):
        assert two_rounds()["requeued"] == 1
    conversation.refresh_from_db()
    assert sent == [("resume", conversation.pk, conversation.run_token, 7)]
    assert conversation.paused_run == state  # the resuming worker takes it under the new token


def test_a_lost_resumption_that_fails_closes_its_turn(viewer_user, sent, broker):
    conversation = queued(viewer_user, age=GRACE + 5)
    state = {"prompt_sequence": 7, "tool_uses": [{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}],
             "results": []}
    Conversation.objects.filter(pk=conversation.pk).update(paused_run=state, queue_attempts=2)
    assert two_rounds()["failed"] == 1
    conversation.refresh_from_db()
    assert conversation.paused_run is None and conversation.status == Conversation.Status.FAILED
    closing = Message.objects.filter(conversation=conversation).order_by("-position").first()
    assert closing.content[0]["tool_use_id"] == "toolu_1" and closing.content[0]["is_error"]


def test_a_send_that_fails_during_a_re_send_leaves_the_run_for_the_next_round(
        viewer_user, monkeypatch, broker, django_capture_on_commit_callbacks):
    def broker_gone(*args, **kwargs):
        raise ConnectionError("Redis went away again")

    monkeypatch.setattr(tasks.run_conversation_task, "delay", broker_gone)
    conversation = queued(viewer_user, age=GRACE + 5)
    with django_capture_on_commit_callbacks(execute=True):
        assert two_rounds()["requeued"] == 1
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.RUNNING and events_of(conversation, "error") == []


def test_only_run_tasks_carry_a_token():
    def message(task: str, args: list) -> bytes:
        body = base64.b64encode(json.dumps([args, {}, {}]).encode()).decode()
        return json.dumps({"body": body, "headers": {"task": task, "id": "x"},
                           "properties": {"body_encoding": "base64"}}).encode()

    assert requeue.run_token_of(message("conversations.run_conversation", [4, "abc"])) == "abc"
    unacked_entry = json.dumps([json.loads(message("conversations.resume_conversation", [4, "def", 9])), "", "celery"])
    assert requeue.run_token_of(unacked_entry) == "def"
    assert requeue.run_token_of(message("mcp_servers.sync_server", [4, "abc"])) == ""
    assert requeue.run_token_of(b"not json") == ""


def test_a_broker_that_is_not_redis_is_not_guessed_at():
    with pytest.raises(lost_tasks.BrokerUnavailable):
        lost_tasks.messages_the_broker_holds("memory://", "celery", GRACE)
    with pytest.raises(lost_tasks.BrokerUnavailable):
        lost_tasks.messages_the_broker_holds("redis://127.0.0.1:1/0", "celery", GRACE)  # nothing answers there
