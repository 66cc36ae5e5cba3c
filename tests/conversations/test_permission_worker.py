"""Permission prompts hold no worker: a real Celery worker (concurrency 1) pauses the run at the prompt,
and the answer — allow, deny, or the scheduled timeout — queues the task that resumes it."""
from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker

from playground.celery_app import app
from playground.conversations import services
from playground.conversations.models import Conversation, Event
from playground.registry.models import PermissionRule
from tests.conversations.conftest import events_of, make_profile

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TIME = "mcp__time__get_current_time"
QUESTION = "What time is it in Tokyo?"


@pytest.fixture
def celery_worker(redis, settings):
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = settings.REDIS_URL, False
    app.control.purge()  # tasks other tests queued (and nobody ran) would otherwise go first
    # solo: one task at a time, so a task blocked on a prompt would stop every other conversation.
    with start_worker(app, pool="solo", concurrency=1, perform_ping_check=False, shutdown_timeout=10) as worker:
        yield worker
    app.conf.broker_url, app.conf.task_always_eager = previous


@pytest.fixture
def asking_profile(db):
    profile = make_profile("asking")
    PermissionRule.objects.create(effect="ask", pattern=TIME, profile=profile)
    return profile


def wait_until(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:g} s: {what}")


def conversation_row(conversation) -> Conversation:
    return Conversation.objects.get(pk=conversation.pk)


def ask(user, profile) -> tuple[Conversation, Event]:
    """Send the question; return once the prompt is open and the worker's task has ended."""
    conversation = services.start_conversation(user, profile=profile, provider="demo")
    services.send_message(conversation, QUESTION, user=user)
    prompt = wait_until(lambda: Event.objects.filter(conversation=conversation, type="permission_prompt").first(),
                        "a permission prompt")
    wait_until(lambda: (lambda c: c.status == Conversation.Status.WAITING and c.paused_run is not None
                        and c.heartbeat_at is None)(conversation_row(conversation)),
               "the run paused, its task ended")
    return conversation, prompt


def wait_idle(conversation, timeout: float = 60.0) -> Conversation:
    return wait_until(lambda: (lambda c: c if c.status == Conversation.Status.IDLE else None)(conversation_row(conversation)),
                      "the conversation idle", timeout)


def time_result(conversation) -> dict:
    return next(e.payload for e in events_of(conversation, "tool_result") if e.payload["name"] == TIME)


def test_allowing_resumes_the_run_and_completes_it(celery_worker, admin_user, tool_world, asking_profile):
    conversation, prompt = ask(admin_user, asking_profile)
    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    conversation = wait_idle(conversation)
    assert conversation.paused_run is None
    assert time_result(conversation)["is_error"] is False
    finished = events_of(conversation, "turn_finished")[-1].payload
    assert finished["final"] and finished["reason"] == "end_turn"
    assert "Asia/Tokyo" in events_of(conversation, "message")[-1].payload["text"]
    statuses = [e.payload.get("status") for e in events_of(conversation, "turn_finished")]
    assert statuses[-1] == "idle"


def test_denying_resumes_the_run_with_a_denial(celery_worker, admin_user, tool_world, asking_profile):
    conversation, prompt = ask(admin_user, asking_profile)
    services.answer_permission(conversation, prompt.sequence, "deny", user=admin_user)
    conversation = wait_idle(conversation)
    result = time_result(conversation)
    assert result["is_error"] is True and "denied permission" in result["error"]
    assert events_of(conversation, "turn_finished")[-1].payload["reason"] == "end_turn"


def test_an_unanswered_prompt_is_denied_by_the_scheduled_timeout(celery_worker, admin_user, tool_world, asking_profile,
                                                                 settings):
    settings.PERMISSION_PROMPT_TIMEOUT_SECONDS = 1
    conversation, prompt = ask(admin_user, asking_profile)
    conversation = wait_idle(conversation)
    answer = events_of(conversation, "permission_answer")[0].payload
    assert answer["prompt_sequence"] == prompt.sequence and answer["choice"] == "timeout"
    assert "nobody answered within 1 seconds" in time_result(conversation)["error"]


def test_an_open_prompt_holds_no_worker(celery_worker, admin_user, tool_world, asking_profile, native_profile):
    waiting, prompt = ask(admin_user, asking_profile)
    # The only worker process is free: another conversation's message runs to the end meanwhile.
    other = services.start_conversation(admin_user, profile=native_profile, provider="demo")
    services.send_message(other, QUESTION, user=admin_user)
    other = wait_idle(other)
    assert time_result(other)["is_error"] is False
    assert conversation_row(waiting).status == Conversation.Status.WAITING
    services.answer_permission(waiting, prompt.sequence, "always", user=admin_user)
    assert wait_idle(waiting).always_allowed == [TIME]


def test_cancelling_while_waiting_ends_the_run(celery_worker, admin_user, tool_world, asking_profile):
    from playground.conversations.tasks import expire_permission_prompt_task

    conversation, prompt = ask(admin_user, asking_profile)
    assert services.request_cancel(conversation, user=admin_user)  # no worker to tell: it ends at once
    conversation = conversation_row(conversation)
    assert conversation.status == Conversation.Status.IDLE and conversation.paused_run is None
    assert events_of(conversation, "permission_answer")[0].payload["choice"] == "cancelled"
    assert expire_permission_prompt_task(conversation.pk, prompt.sequence) is False  # its timeout finds it answered
    # A new message runs (the cancelled call got its result, so the history is valid).
    services.send_message(conversation, QUESTION, user=admin_user)
    second = wait_until(lambda: Event.objects.filter(conversation=conversation, type="permission_prompt")
                        .exclude(sequence=prompt.sequence).first(), "the second message's prompt")
    services.answer_permission(conversation, second.sequence, "once", user=admin_user)
    wait_idle(conversation)
    assert [e.payload["choice"] for e in events_of(conversation, "permission_answer")] == ["cancelled", "once"]
