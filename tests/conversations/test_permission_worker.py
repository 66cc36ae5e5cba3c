"""Permission prompts hold no worker: a real Celery worker (concurrency 1) pauses the run at the prompt,
and the answer — allow, deny, or the scheduled timeout — queues the task that resumes it."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

import pytest
from celery.contrib.testing.worker import start_worker
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.db import connections

from playground.celery_app import app
from playground.conversations import services
from playground.conversations.broadcast import conversation_group
from playground.conversations.models import Conversation, Event
from playground import lost_tasks
from playground.realtime import close_layer
from playground.registry.models import PermissionRule
from tests.conversations.conftest import events_of, make_profile
from tests.conversations.test_lost_worker import database_url
from tests.polling import wait_until

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
    assert result["is_error"] is True and "denied permission" in result["error"] and result["refusal"] == "person_denied"
    assert events_of(conversation, "turn_finished")[-1].payload["reason"] == "end_turn"


def test_an_unanswered_prompt_is_denied_at_its_deadline_by_the_watch(celery_worker, admin_user, tool_world, asking_profile,
                                                                     settings):
    settings.PERMISSION_PROMPT_TIMEOUT_SECONDS = 1
    # Celery beat sends the round to a worker; here a thread runs it every 0.2 s instead.
    stop = threading.Event()

    def rounds() -> None:
        try:
            while not stop.wait(0.2):
                lost_tasks.run_round()
        finally:
            connections.close_all()  # this thread's own

    beat = threading.Thread(target=rounds, daemon=True)
    beat.start()
    try:
        conversation, prompt = ask(admin_user, asking_profile)
        conversation = wait_idle(conversation)
    finally:
        stop.set()
        beat.join(timeout=10)
    answer = events_of(conversation, "permission_answer")[0].payload
    assert answer["prompt_sequence"] == prompt.sequence and answer["choice"] == "timeout"
    assert "nobody answered within 1 seconds" in time_result(conversation)["error"]
    assert time_result(conversation)["refusal"] == "prompt_timeout"


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
    assert conversation.status == Conversation.Status.CANCELLED and conversation.paused_run is None
    assert events_of(conversation, "permission_answer")[0].payload["choice"] == "cancelled"
    cancelled = events_of(conversation, "cancelled")[0].payload
    assert cancelled["stage"] == "waiting_permission" and cancelled["interrupted"] == TIME
    assert expire_permission_prompt_task(conversation.pk, prompt.sequence) is False  # its timeout finds it answered
    # A new message runs (the cancelled call got its result, so the history is valid).
    services.send_message(conversation, QUESTION, user=admin_user)
    second = wait_until(lambda: Event.objects.filter(conversation=conversation, type="permission_prompt")
                        .exclude(sequence=prompt.sequence).first(), "the second message's prompt")
    services.answer_permission(conversation, second.sequence, "once", user=admin_user)
    wait_idle(conversation)
    assert [e.payload["choice"] for e in events_of(conversation, "permission_answer")] == ["cancelled", "once"]


def test_a_one_process_prefork_worker_pauses_resumes_and_broadcasts_from_its_child(
        redis, admin_user, tool_world, asking_profile, native_profile, tmp_path):
    """The deployment's pool: the task runs in a forked child, which sends events through its own
    channel layer (playground.realtime resets after fork) and is free while the prompt is open."""
    waiting = services.start_conversation(admin_user, profile=asking_profile, provider="demo")
    joined, stop, received = threading.Event(), threading.Event(), []

    def listen() -> None:
        async def run() -> None:
            layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
            channel = await layer.new_channel()
            await layer.group_add(conversation_group(waiting.pk), channel)
            joined.set()
            # One receive kept pending across polls: cancelling one (as wait_for does on a timeout)
            # makes the pub/sub layer drop the channel, and messages sent meanwhile are lost.
            receiving = asyncio.ensure_future(layer.receive(channel))
            try:
                while not stop.is_set():
                    done, _ = await asyncio.wait({receiving}, timeout=0.5)
                    if done:
                        received.append(receiving.result()["sequence"])
                        receiving = asyncio.ensure_future(layer.receive(channel))
            finally:
                receiving.cancel()
                await close_layer(layer)

        asyncio.run(run())

    listener = threading.Thread(target=listen)
    listener.start()
    assert joined.wait(10)
    queue = os.environ["CELERY_TASK_DEFAULT_QUEUE"]
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis, False
    app.control.purge()
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "playground.celery_app", "worker", "--pool", "prefork", "--concurrency", "1",
         "-Q", queue, "-n", f"prefork-{os.getpid()}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
        env={**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis}, stdout=log.open("ab"),
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        services.send_message(waiting, QUESTION, user=admin_user)
        prompt = wait_until(lambda: Event.objects.filter(conversation=waiting, type="permission_prompt").first(),
                            "a permission prompt", 90)
        wait_until(lambda: conversation_row(waiting).heartbeat_at is None, "the paused task ended", 30)
        other = services.start_conversation(admin_user, profile=native_profile, provider="demo")
        services.send_message(other, QUESTION, user=admin_user)
        assert time_result(wait_idle(other))["is_error"] is False
        services.answer_permission(waiting, prompt.sequence, "once", user=admin_user)
        last = wait_idle(waiting).next_sequence - 1
        wait_until(lambda: last in received, "the last event's broadcast", 30)
    except AssertionError:
        raise AssertionError(f"worker log:\n{log.read_text()[-3000:]}") from None
    finally:
        stop.set()
        listener.join(10)
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        app.conf.broker_url, app.conf.task_always_eager = previous
    assert set(range(1, last + 1)) <= set(received)  # every saved event was announced, most from the child
