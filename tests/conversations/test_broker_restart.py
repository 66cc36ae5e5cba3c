"""A real Redis restarts under queued runs and an open prompt: the runs are handed over again and
complete, the prompt whose timeout task Redis lost is denied (requeue.py, lost_tasks.py).

Each test starts a private `redis-server` on a free port (no persistence, like the embedded one),
real Celery workers (child processes) against it and this test's database, queues a run, stops Redis
before a worker starts that run (or while its prompt's timeout waits), starts Redis again, and waits —
with a deadline — until the run has completed. The shared Redis is not used at all.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import redis as redis_client

from playground.celery_app import app
from playground.conversations import services
from playground.conversations.models import Conversation
from playground.conversations.requeue import run_token_of
from playground.conversations.tasks import run_conversation_task
from playground.conversations.testing.fake_api import text_reply
from playground.lost_tasks import ROUND_TASK, task_of
from playground.registry.models import PermissionRule
from playground.runner.embedded_redis import EmbeddedRedis, free_port, port_is_free, start_embedded_redis
from tests.conversations.conftest import events_of, make_profile
from tests.conversations.test_lost_worker import WorkerProcess, database_url, status_of, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary"),
]
GRACE = 2.0  # AGENT_QUEUE_GRACE_SECONDS of the workers here
TIME = "mcp__time__get_current_time"


def port_outside_the_ephemeral_range() -> int:
    """A free port the kernel never hands out by itself: while Redis is down, neither another test
    process asking for a free port (`free_port`, bind to 0) nor an outgoing connection's source port
    can take it, so Redis can start again on the same one."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return free_port()
    candidates = [*range(10_000, low), *range(high + 1, 65_536)]
    for port in random.sample(candidates, min(len(candidates), 200)):
        if port_is_free("127.0.0.1", port):
            return port
    return free_port()


class PrivateRedis:
    """A redis-server of this test only, restartable on the same port (its data does not survive)."""

    def __init__(self) -> None:
        self.url = f"redis://127.0.0.1:{port_outside_the_ephemeral_range()}/0"
        self.server: EmbeddedRedis | None = None

    def start(self) -> None:
        self.server = start_embedded_redis(self.url, prefer="redis-server")
        assert self.server.url == self.url, "the port was taken while Redis was down"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def client(self) -> redis_client.Redis:
        return redis_client.Redis.from_url(self.url, socket_timeout=5)

    def held_tasks(self, queue: str) -> list[tuple[str, list]]:
        """(task name, arguments) of the tasks waiting in `queue` or fetched by a worker and not acknowledged."""
        client = self.client()
        try:
            raws = list(client.lrange(queue, 0, -1)) + list(client.hvals("unacked"))
        finally:
            client.close()
        return [task for task in map(task_of, raws) if task is not None]

    def queued_tokens(self, queue: str) -> list[str]:
        """Run tokens of the tasks waiting in `queue`, and of those a worker fetched but not acknowledged."""
        client = self.client()
        try:
            raws = list(client.lrange(queue, 0, -1)) + list(client.hvals("unacked"))
        finally:
            client.close()
        return [run_token_of(raw) for raw in raws]


@pytest.fixture
def private_redis():
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()


class PreforkWorker(WorkerProcess):
    """A worker with one child process: its main process keeps fetching while the child runs a task
    (a solo worker fetches nothing while it runs one, so it could never have a task prefetched).
    No beat in it: a background round would take the one task it fetches ahead."""

    def __init__(self, env: dict[str, str], queue: str, log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "playground.celery_app", "worker", "--pool", "prefork",
             "--concurrency", "1", "-Q", queue, "-n", f"{queue}-{uuid.uuid4().hex[:6]}@%h", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )


def publish_run(conversation: Conversation, redis_url: str, queue: str) -> None:
    """What `runs.queue_run` does, sent to the private Redis (the app's pool may know another)."""
    with app.connection_for_write(redis_url) as connection:
        run_conversation_task.apply_async(args=(conversation.pk, conversation.run_token), queue=queue,
                                          connection=connection)


def worker_env(redis_url: str, queue: str, fake_api, **extra: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url,
            "CELERY_TASK_DEFAULT_QUEUE": queue, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": fake_api.url,
            "AGENT_QUEUE_GRACE_SECONDS": str(GRACE), **extra}


def last_text(conversation: Conversation) -> str:
    return [e.payload["text"] for e in events_of(conversation, "message")][-1]


def requeue_notes(conversation: Conversation) -> list[str]:
    return [e.payload["note"] for e in events_of(conversation, "status") if "handed to a worker again" in e.payload["note"]]


def test_a_run_queued_when_redis_restarts_is_handed_over_again_by_the_next_worker(
        private_redis, admin_user, tool_world, native_profile, fake_api, tmp_path):
    queue = f"requeue-queued-{os.getpid()}"
    fake_api.script(text_reply("Handed over again."), text_reply("And the next one."))
    log = tmp_path / "worker.log"
    conversation = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
    services.send_message(conversation, "What time is it?", user=admin_user, enqueue=False)
    publish_run(conversation, private_redis.url, queue)
    assert private_redis.queued_tokens(queue) == [conversation.run_token]

    private_redis.stop()  # no worker took the task yet; without persistence the queue goes with Redis
    private_redis.start()
    assert private_redis.queued_tokens(queue) == []

    worker = WorkerProcess(worker_env(private_redis.url, queue, fake_api), queue, log, beat=True)
    try:
        wait_until(lambda: status_of(conversation) == Conversation.Status.IDLE, "the run handed over again", 90, details=log.read_text)
        conversation.refresh_from_db()
        assert last_text(conversation) == "Handed over again."
        assert len(requeue_notes(conversation)) == 1 and "(1 of 3)" in requeue_notes(conversation)[0]
        assert events_of(conversation, "error") == []

        # The conversation takes the next message, run by the same worker.
        services.send_message(conversation, "And now?", user=admin_user, enqueue=False)
        publish_run(conversation, private_redis.url, queue)
        wait_until(lambda: status_of(conversation) == Conversation.Status.IDLE, "the next run", 90, details=log.read_text)
        assert last_text(conversation) == "And the next one."
    finally:
        worker.stop()


@pytest.mark.parametrize("prefetch", ["disabled", "enabled"])
def test_a_run_waiting_behind_a_busy_worker_survives_a_redis_restart(
        prefetch, private_redis, admin_user, tool_world, native_profile, fake_api, tmp_path):
    """The worker is full (AGENT_RUNS_PER_PROCESS=1, one process) while Redis restarts: the first run
    holds its one slot, a middle run's task waits in the process for that slot (taken from the broker,
    so Redis cannot lose it). With prefetch disabled (the setting) the second run's task waits in the
    queue; with prefetch enabled the worker has already fetched it (it sits in kombu's `unacked` hash).
    Either way Redis loses it, and the background round (beat) hands it over."""
    queue = f"requeue-busy-{prefetch}-{os.getpid()}"
    busy, let_go = threading.Event(), threading.Event()

    def slow_first_answer(body):
        busy.set()
        let_go.wait(60)
        return text_reply("First done.")

    fake_api.script(slow_first_answer, text_reply("Middle done."), text_reply("Second done."), text_reply("Third done."))
    log = tmp_path / "worker.log"
    env = worker_env(private_redis.url, queue, fake_api, AGENT_RUNS_PER_PROCESS="1",
                     CELERY_WORKER_DISABLE_PREFETCH="true" if prefetch == "disabled" else "false")
    worker, beat = PreforkWorker(env, queue, log), None
    try:
        first = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
        services.send_message(first, "Take your time.", user=admin_user, enqueue=False)
        publish_run(first, private_redis.url, queue)
        wait_until(busy.is_set, "the worker busy with the first run", 90, details=log.read_text)

        middle = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
        services.send_message(middle, "After you.", user=admin_user, enqueue=False)
        publish_run(middle, private_redis.url, queue)
        # Taken and acknowledged (acks_late off): neither in the queue nor in `unacked` any more.
        wait_until(lambda: middle.run_token not in private_redis.queued_tokens(queue),
                   "the middle run's task taken by the full process", 30, details=log.read_text)

        second = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
        services.send_message(second, "Me next.", user=admin_user, enqueue=False)
        publish_run(second, private_redis.url, queue)
        where = "unacked" if prefetch == "enabled" else queue

        def second_is_held() -> bool:
            client = private_redis.client()
            try:
                raws = client.hvals("unacked") if where == "unacked" else client.lrange(queue, 0, -1)
            finally:
                client.close()
            return second.run_token in [run_token_of(raw) for raw in raws]

        wait_until(second_is_held, f"the second run's task in {where}", 30, details=log.read_text)

        private_redis.stop()
        private_redis.start()
        assert private_redis.queued_tokens(queue) == []  # both the queue and `unacked` went with Redis
        beat = WorkerProcess(env, queue, log, beat=True)  # Celery beat and its rounds, from now on
        let_go.set()

        wait_until(lambda: status_of(first) == Conversation.Status.IDLE, "the first run", 90, details=log.read_text)
        wait_until(lambda: status_of(middle) == Conversation.Status.IDLE, "the middle run, held by the worker", 90, details=log.read_text)
        assert last_text(middle) == "Middle done." and requeue_notes(middle) == []
        wait_until(lambda: status_of(second) == Conversation.Status.IDLE, "the second run, handed over again", 90, details=log.read_text)
        second.refresh_from_db()
        assert last_text(second) == "Second done."
        assert len(requeue_notes(second)) == 1 and events_of(second, "error") == []
        assert requeue_notes(first) == []  # the run the worker had started is never handed over

        services.send_message(second, "Once more.", user=admin_user, enqueue=False)
        publish_run(second, private_redis.url, queue)
        wait_until(lambda: status_of(second) == Conversation.Status.IDLE, "a new message after the restart", 90, details=log.read_text)
        assert last_text(second) == "Third done."
    finally:
        let_go.set()
        worker.stop()
        if beat is not None:
            beat.stop()


def test_an_open_prompt_survives_a_redis_restart_and_is_denied_at_its_deadline(private_redis, admin_user, tool_world, tmp_path):
    """The run pauses on a prompt, Redis restarts while it is open, and the worker goes on: nothing of
    the prompt was in Redis or held by the worker (a countdown task was both: lost with Redis, and the
    worker holding it died when its connection dropped). The watch denies the prompt past its deadline,
    once, and the run finishes with the denial."""
    queue = f"requeue-prompt-{os.getpid()}"
    timeout = 4.0
    profile = make_profile("asking")
    PermissionRule.objects.create(effect="ask", pattern=TIME, profile=profile)
    conversation = services.start_conversation(admin_user, profile=profile, provider="demo")
    services.send_message(conversation, "What time is it in Tokyo?", user=admin_user, enqueue=False)
    log = tmp_path / "worker.log"
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": private_redis.url,
           "CELERY_BROKER_URL": private_redis.url, "CELERY_TASK_DEFAULT_QUEUE": queue,
           "AGENT_QUEUE_GRACE_SECONDS": str(GRACE), "PERMISSION_PROMPT_TIMEOUT_SECONDS": str(timeout)}
    worker = WorkerProcess(env, queue, log, beat=True)
    try:
        publish_run(conversation, private_redis.url, queue)
        wait_until(lambda: (lambda c: c.status == Conversation.Status.WAITING and c.paused_run is not None
                            and c.heartbeat_at is None)(Conversation.objects.get(pk=conversation.pk)),
                   "the run paused on the prompt", 90, details=log.read_text)
        prompt = events_of(conversation, "permission_prompt")[0]
        # The prompt's timeout is no message at all (beat's background rounds are the only ones).
        assert [task for task, _ in private_redis.held_tasks(queue) if task != ROUND_TASK] == []

        private_redis.stop()
        private_redis.start()
        wait_until(lambda: status_of(conversation) == Conversation.Status.IDLE, "the run finished after the denial", 90, details=log.read_text)
        assert worker.process.poll() is None, "the worker died with the broker connection"
    finally:
        worker.stop()
    answers = events_of(conversation, "permission_answer")
    assert [(a.payload["choice"], a.payload["prompt_sequence"]) for a in answers] == [("timeout", prompt.sequence)]
    late = (answers[0].created_at - prompt.created_at).total_seconds()
    assert late >= timeout
    result = next(e.payload for e in events_of(conversation, "tool_result") if e.payload["name"] == TIME)
    assert result["is_error"] is True and events_of(conversation, "error") == []
    print(f"prompt with a {timeout:g} s timeout denied {late:.1f} s after it was asked (grace {GRACE} s)")
