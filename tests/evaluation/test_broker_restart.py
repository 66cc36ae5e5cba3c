"""A real Redis restarts under a queued evaluation run; the background round (on beat) sends it again and it
completes (playground/lost_tasks.py). A private `redis-server` and a real worker process, as in
tests/conversations/test_broker_restart.py; the shared Redis is not used."""
from __future__ import annotations

import os
import shutil
import time

import pytest

from playground.celery_app import app
from playground.evaluation.models import EvaluationRun
from playground.evaluation.tasks import run_evaluation
from tests.conversations.test_broker_restart import GRACE, PrivateRedis, private_redis  # noqa: F401 - the fixture
from tests.conversations.test_lost_worker import WorkerProcess, database_url, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary"),
]


def held_runs(server: PrivateRedis, queue: str) -> list[int]:
    return [args[0] for task, args in server.held_tasks(queue) if task == "evaluation.run_evaluation"]


def test_an_evaluation_queued_when_redis_restarts_is_sent_again_and_completes(private_redis, toy_toolsets, tmp_path):  # noqa: F811 - the imported fixture
    queue = f"lost-eval-{os.getpid()}"
    log = tmp_path / "worker.log"
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], split="all", progress_message="queued")
    with app.connection_for_write(private_redis.url) as connection:  # what start_run sends, to the private Redis
        run_evaluation.apply_async(args=(run.pk,), queue=queue, connection=connection)
    assert held_runs(private_redis, queue) == [run.pk]

    private_redis.stop()  # no worker took the task; without persistence the queue goes with Redis
    private_redis.start()
    back = time.monotonic()
    assert held_runs(private_redis, queue) == []

    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": private_redis.url,
           "CELERY_BROKER_URL": private_redis.url, "CELERY_TASK_DEFAULT_QUEUE": queue,
           "AGENT_QUEUE_GRACE_SECONDS": str(GRACE)}
    worker = WorkerProcess(env, queue, log, beat=True)
    try:
        wait_until(lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.DONE,
                   "the evaluation sent again and done", 90, details=log.read_text)
        took = time.monotonic() - back
    finally:
        worker.stop()
    run.refresh_from_db()
    assert run.queue_attempts == 1 and run.error == "" and run.results["rows"][0]["backend"] == "bm25"
    assert "evaluation run" in log.read_text() and "requeued" in log.read_text()
    print(f"evaluation sent again and done {took:.1f} s after Redis came back (grace {GRACE} s, worker start included)")
