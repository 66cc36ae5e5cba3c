"""A real worker process is killed mid-run; the next worker that starts frees its conversation.

The worker runs as a child process (a Celery worker cannot be SIGKILLed in a thread) on a queue of
its own, against this test's database and the fake Messages API served from this process.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from playground.celery_app import app
from playground.conversations import services
from playground.conversations.models import Conversation
from playground.conversations.tasks import run_conversation_task
from playground.conversations.testing.fake_api import text_reply
from tests.conversations.conftest import events_of
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
HEARTBEAT, LOST = 0.2, 1.0
RUNS_IN_FLIGHT = 6


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    credentials = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{credentials}@{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db['NAME']}"


class WorkerProcess:
    """A Celery worker child process on `queue`; with `beat`, Celery beat runs inside it (-B) and sends
    the background round (playground/lost_tasks.py) to the env's CELERY_TASK_DEFAULT_QUEUE."""

    def __init__(self, env: dict[str, str], queue: str, log: Path, *, beat: bool = False) -> None:
        self.log = log
        argv = [sys.executable, "-m", "celery", "-A", "playground.celery_app", "worker", "--pool", "solo", "-Q", queue,
                "-n", f"{queue}-{uuid.uuid4().hex[:6]}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
        if beat:
            argv += ["-B", "-s", str(log.parent / f"beat-{uuid.uuid4().hex[:6]}")]
        self.process = subprocess.Popen(
            argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def worker_log(log: Path) -> Callable[[], str]:
    return lambda: "worker log:\n" + log.read_text()[-3000:]


def status_of(conversation) -> str:
    return Conversation.objects.values_list("status", flat=True).get(pk=conversation.pk)


def test_a_killed_worker_is_noticed_and_the_next_worker_frees_its_conversation(
        redis, settings, admin_user, tool_world, native_profile, fake_api, tmp_path):
    settings.AGENT_HEARTBEAT_SECONDS, settings.AGENT_LOST_SECONDS = HEARTBEAT, LOST
    queue = f"lease-test-{os.getpid()}"
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis, "ANTHROPIC_API_KEY": "sk-test",
           "ANTHROPIC_BASE_URL": fake_api.url, "AGENT_HEARTBEAT_SECONDS": str(HEARTBEAT), "AGENT_LOST_SECONDS": str(LOST)}
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis, False
    model_called, let_go = threading.Event(), threading.Event()

    def never_answers_in_time(body):
        model_called.set()
        let_go.wait(60)
        return text_reply("too late")

    fake_api.script(never_answers_in_time, text_reply("Back again."))
    log = tmp_path / "worker.log"
    workers: list[WorkerProcess] = []
    try:
        conversation = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
        services.send_message(conversation, "What time is it?", user=admin_user, enqueue=False)
        run_conversation_task.apply_async(args=(conversation.pk, conversation.run_token), queue=queue)
        workers.append(WorkerProcess(env, queue, log))
        wait_until(model_called.is_set, "the worker's model request", 90, details=worker_log(log))

        beats: set = set()

        def beating() -> bool:
            beats.add(Conversation.objects.values_list("heartbeat_at", flat=True).get(pk=conversation.pk))
            return len(beats) >= 3

        wait_until(beating, "three heartbeats", 10, details=worker_log(log))
        workers[0].kill()
        time.sleep(LOST + 3 * HEARTBEAT)
        # Dead for longer than AGENT_LOST_SECONDS, but nobody has looked yet.
        assert status_of(conversation) == Conversation.Status.RUNNING

        workers.append(WorkerProcess(env, queue, log))  # its start sweeps (tasks.release_runs_of_lost_workers)
        wait_until(lambda: status_of(conversation) == Conversation.Status.FAILED, "the release", 90, details=worker_log(log))
        error = [e.payload for e in events_of(conversation, "error")][-1]
        assert error["kind"] == "worker_lost" and "stopped answering" in error["message"]

        # The conversation goes on, on the new worker.
        services.send_message(conversation, "Are you there?", user=admin_user, enqueue=False)
        run_conversation_task.apply_async(args=(conversation.pk, conversation.run_token), queue=queue)
        wait_until(lambda: status_of(conversation) == Conversation.Status.IDLE, "the second run", 90, details=worker_log(log))
        assert [e.payload["text"] for e in events_of(conversation, "message")][-1] == "Back again."
    finally:
        let_go.set()
        for worker in workers:
            worker.stop()
        app.conf.broker_url, app.conf.task_always_eager = previous


def test_a_killed_workers_conversation_is_released_by_the_round_without_anyone_looking(
        redis, settings, admin_user, tool_world, native_profile, fake_api, tmp_path):
    """Celery beat's background round (playground/lost_tasks.py) releases it within a bounded time:
    no page is opened, no message sent, no worker starts after the kill."""
    queue, round_queue = f"lease-sweep-{os.getpid()}", f"lease-rounds-{os.getpid()}"
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis, "ANTHROPIC_API_KEY": "sk-test",
           "ANTHROPIC_BASE_URL": fake_api.url, "AGENT_HEARTBEAT_SECONDS": str(HEARTBEAT), "AGENT_LOST_SECONDS": str(LOST),
           "CELERY_TASK_DEFAULT_QUEUE": round_queue, "AGENT_QUEUE_GRACE_SECONDS": "1"}
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis, False
    model_called, let_go = threading.Event(), threading.Event()

    def never_answers_in_time(body):
        model_called.set()
        let_go.wait(60)
        return text_reply("too late")

    # The one worker process carries several runs at once, all waiting on the model when it is killed.
    fake_api.script(*[never_answers_in_time] * RUNS_IN_FLIGHT)
    log = tmp_path / "worker.log"
    workers: list[WorkerProcess] = []
    try:
        conversations = []
        for number in range(RUNS_IN_FLIGHT):
            conversation = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
            services.send_message(conversation, f"What time is it? ({number})", user=admin_user, enqueue=False)
            run_conversation_task.apply_async(args=(conversation.pk, conversation.run_token), queue=queue)
            conversations.append(conversation)
        workers.append(WorkerProcess(env, queue, log))
        wait_until(lambda: len(fake_api.message_requests) >= RUNS_IN_FLIGHT, "every run's model request in flight at once",
                   90, details=log.read_text)
        # Beat starts once the run is claimed: its rounds watch only the default queue, so a run sent to
        # another queue and not yet claimed would look lost to them.
        workers.append(WorkerProcess(env, round_queue, log, beat=True))
        wait_until(lambda: re.search(r"background_round\[[^\]]+\] succeeded", log.read_text()),
                   "a first background round", 90, details=log.read_text)
        workers[0].kill()
        killed = time.monotonic()
        wait_until(lambda: all(status_of(c) == Conversation.Status.FAILED for c in conversations),
                   "the release of every run by the round", 60, details=log.read_text)
        took = time.monotonic() - killed
        assert took < LOST + 5.0, f"released {took:.1f} s after the kill"
        for conversation in conversations:
            errors = [e.payload for e in events_of(conversation, "error")]
            assert len(errors) == 1 and errors[0]["kind"] == "worker_lost" and "stopped answering" in errors[0]["message"]
    finally:
        let_go.set()
        for worker in workers:
            worker.stop()
        app.conf.broker_url, app.conf.task_always_eager = previous
