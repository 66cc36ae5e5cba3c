"""Permission prompts nobody answered: the workers' watch denies them past their deadline (requeue.py).

The sweep and `expire_permission_prompt_task` (still run for messages a persistent Redis kept) may
both fire, in either order or at once: one answer, one event, one resumption. The queueing of tasks
is replaced by a list; the real Redis restart under a paused run is in test_broker_restart.py.
"""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from playground import lost_tasks
from playground.conversations import requeue, services, tasks
from playground.conversations.models import Conversation, Event
from playground.conversations.testing.fake_api import tool_use_reply
from playground.registry.models import PermissionRule
from tests.conversations.conftest import converse, events_of

GRACE, TIMEOUT = 10, 60


@pytest.fixture(autouse=True)
def deadline_settings(settings):
    settings.AGENT_QUEUE_GRACE_SECONDS = GRACE
    settings.PERMISSION_PROMPT_TIMEOUT_SECONDS = TIMEOUT


@pytest.fixture
def sent(monkeypatch):
    """The resumptions handed to the broker: (conversation id, run token, prompt sequence)."""
    queued: list[tuple] = []
    monkeypatch.setattr(tasks.resume_conversation_task, "delay", lambda pk, token, prompt: queued.append((pk, token, prompt)))
    return queued


def paused(user, profile, fake_api, claude, *, age: float) -> tuple[Conversation, Event]:
    """A run paused on a prompt that was asked `age` seconds ago."""
    PermissionRule.objects.get_or_create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}))
    conversation, outcome = converse(user, "echo hi", profile=profile, provider=claude)
    assert outcome.reason == "waiting" and conversation.status == Conversation.Status.WAITING
    prompt = events_of(conversation, "permission_prompt")[-1]
    Event.objects.filter(pk=prompt.pk).update(created_at=timezone.now() - timedelta(seconds=age))
    return conversation, prompt


def answers(conversation) -> list[dict]:
    return [e.payload for e in events_of(conversation, "permission_answer")]


def test_a_prompt_open_past_its_deadline_is_denied_by_the_sweep(
        admin_user, tool_world, native_profile, fake_api, claude, sent, django_capture_on_commit_callbacks):
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 1
    conversation.refresh_from_db()
    assert [(a["choice"], a["prompt_sequence"]) for a in answers(conversation)] == [("timeout", prompt.sequence)]
    assert f"no answer within {TIMEOUT} s: denied" in answers(conversation)[0]["note"]
    # The run goes back to a worker under its token.
    assert conversation.status == Conversation.Status.RUNNING
    assert sent == [(conversation.pk, conversation.run_token, prompt.sequence)]
    assert timezone.now() - conversation.queued_at < timedelta(seconds=5)  # the resumption's own grace starts now
    assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 0


def test_a_prompt_within_its_deadline_or_answered_is_left_alone(
        admin_user, tool_world, native_profile, fake_api, claude, sent):
    young, _ = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT - 3)
    answered, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 60)
    services.answer_permission(answered, prompt.sequence, "once", user=admin_user)
    assert requeue.overdue_prompts() == []
    assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 0
    assert answers(young) == [] and [a["choice"] for a in answers(answered)] == ["once"]


def test_the_timeout_task_first_then_the_sweep_one_answer(
        admin_user, tool_world, native_profile, fake_api, claude, sent, django_capture_on_commit_callbacks):
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.expire_permission_prompt_task(conversation.pk, prompt.sequence) is True
        assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 0
    assert len(answers(conversation)) == 1 and len(sent) == 1


def test_the_sweep_first_then_the_timeout_task_one_answer(
        admin_user, tool_world, native_profile, fake_api, claude, sent, django_capture_on_commit_callbacks):
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 1
        assert tasks.expire_permission_prompt_task(conversation.pk, prompt.sequence) is False  # finds it answered
    assert len(answers(conversation)) == 1 and len(sent) == 1


def test_with_the_broker_still_down_the_denied_prompt_waits_for_the_watch_not_an_error(
        admin_user, tool_world, native_profile, fake_api, claude, monkeypatch, django_capture_on_commit_callbacks):
    def broker_down(*args, **kwargs):
        raise ConnectionError("Redis is not back yet")

    monkeypatch.setattr(tasks.resume_conversation_task, "delay", broker_down)
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert lost_tasks.run_sweeps([requeue.PROMPTS]) == 1
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.RUNNING and events_of(conversation, "error") == []
    # The resumption is a run no worker claimed: once the broker is back, the watch sends it again.
    resumed: list[tuple] = []
    monkeypatch.setattr(tasks.resume_conversation_task, "delay", lambda pk, token, seq: resumed.append((pk, token, seq)))
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds", lambda url, queue, grace: [])
    Conversation.objects.filter(pk=conversation.pk).update(queued_at=timezone.now() - timedelta(seconds=GRACE + 1))
    with django_capture_on_commit_callbacks(execute=True):
        _, missing = lost_tasks.lost_round({}, [requeue.RUNS])
        outcome, _ = lost_tasks.lost_round(missing, [requeue.RUNS])
    conversation.refresh_from_db()
    assert outcome["requeued"] == 1 and resumed == [(conversation.pk, conversation.run_token, prompt.sequence)]


@pytest.mark.django_db(transaction=True)
def test_the_sweep_and_the_timeout_task_at_the_same_moment_one_answer(admin_user, tool_world, native_profile, fake_api, claude, sent):
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=TIMEOUT + 1)
    start = threading.Barrier(2)
    results: dict[str, object] = {}

    def fire(name, action):
        try:
            start.wait(10)
            results[name] = action()
        finally:
            connection.close()

    racers = [threading.Thread(target=fire, args=("task", lambda: tasks.expire_permission_prompt_task(conversation.pk, prompt.sequence))),
              threading.Thread(target=fire, args=("sweep", lambda: lost_tasks.run_sweeps([requeue.PROMPTS])))]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    assert sorted([bool(results["task"]), bool(results["sweep"])]) == [False, True]
    assert len(answers(conversation)) == 1 and len(sent) == 1


def test_a_persons_answer_given_while_the_broker_is_down_is_kept_and_handed_over_when_it_is_back(
        admin_user, admin_client, tool_world, native_profile, fake_api, claude, monkeypatch,
        django_capture_on_commit_callbacks):
    def broker_down(*args, **kwargs):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(tasks.resume_conversation_task, "delay", broker_down)
    conversation, prompt = paused(admin_user, native_profile, fake_api, claude, age=1)
    with django_capture_on_commit_callbacks(execute=True):
        services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    conversation.refresh_from_db()
    # Not failed: the answer is recorded, the run waits for a worker, and the page says why.
    assert conversation.status == Conversation.Status.RUNNING and events_of(conversation, "error") == []
    assert [a["choice"] for a in answers(conversation)] == ["once"]
    notes = [e.payload["note"] for e in events_of(conversation, "status")]
    assert any("the answer is kept" in note for note in notes)
    assert "the answer is kept" in admin_client.get(f"/conversations/{conversation.pk}/").content.decode()
    # Redis is back: the round hands the resumption over (twice missing from the broker), with the answer.
    resumed: list[tuple] = []
    monkeypatch.setattr(tasks.resume_conversation_task, "delay", lambda pk, token, seq: resumed.append((pk, token, seq)))
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds", lambda url, queue, grace: [])
    Conversation.objects.filter(pk=conversation.pk).update(queued_at=timezone.now() - timedelta(seconds=GRACE + 1))
    with django_capture_on_commit_callbacks(execute=True):
        _, missing = lost_tasks.lost_round({}, [requeue.RUNS])
        outcome, _ = lost_tasks.lost_round(missing, [requeue.RUNS])
    conversation.refresh_from_db()
    assert outcome["requeued"] == 1 and resumed == [(conversation.pk, conversation.run_token, prompt.sequence)]
    assert conversation.paused_run["prompt_sequence"] == prompt.sequence  # the resumption goes on from the prompt
