"""A real worker process is killed while it runs one of a task run's conversations: a new worker's
watch releases that conversation, the run records it as worker_lost and goes on with the next tasks —
every task ends once, none is run twice (the Messages API double counts the model calls)."""
from __future__ import annotations

import os
import threading

import pytest
from django.conf import settings as django_settings

from playground.agenteval import services
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.celery_app import app
from playground.conversations.models import Conversation
from tests.agenteval.conftest import PLANS, SLACK, TIME, WEATHER, scripted_model
from tests.conversations.conftest import redis  # noqa: F401 - the fixture, used by name
from tests.conversations.test_lost_worker import WorkerProcess, database_url, worker_log
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
HEARTBEAT, LOST, GRACE = 0.2, 1.0, 1.0


def test_a_killed_worker_loses_one_task_and_the_run_goes_on(redis, settings, tool_world, claude_profiles,  # noqa: F811 - the fixture
                                                            scripted_api, admin_user, tmp_path):
    settings.AGENT_HEARTBEAT_SECONDS, settings.AGENT_LOST_SECONDS = HEARTBEAT, LOST
    queue = django_settings.CELERY_TASK_DEFAULT_QUEUE  # where queue_task sends: the workers below read it
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis, "ANTHROPIC_API_KEY": "sk-test",
           "ANTHROPIC_BASE_URL": scripted_api.url, "ANTHROPIC_MAX_RETRIES": "0", "AGENT_HEARTBEAT_SECONDS": str(HEARTBEAT),
           "AGENT_LOST_SECONDS": str(LOST), "AGENT_QUEUE_GRACE_SECONDS": str(GRACE)}
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis, False
    app.control.purge()
    model_called, let_go = threading.Event(), threading.Event()

    def first_call_hangs(body):
        model_called.set()
        let_go.wait(60)
        return scripted_model(body)

    scripted_api.replies.clear()
    scripted_api.script(first_call_hangs, *[scripted_model] * 50)
    task_set = TaskSet.objects.create(name="three", source=TaskSet.Source.UPLOAD)
    for position, (query, gold) in enumerate([("What time is it in Tokyo?", TIME), ("Weather forecast for Paris", WEATHER),
                                              ("Post 'hi' to the #general Slack channel", SLACK)]):
        task_set.tasks.create(external_id=f"t{position}", query=query, expected_tools=[gold], position=position)
    log = tmp_path / "worker.log"
    workers: list[WorkerProcess] = []
    try:
        run = services.start_run(task_set, [claude_profiles[0]], concurrency=1, user=admin_user)
        workers.append(WorkerProcess(env, queue, log))
        wait_until(model_called.is_set, "the first conversation's model call", 90, details=worker_log(log))
        workers[0].kill()  # mid-request: nothing of the first task's run is recorded as ended
        # With beat: its rounds release the dead worker's conversation and carry the run on (no thread
        # in the worker does that any more).
        workers.append(WorkerProcess(env, queue, log, beat=True))

        def run_over() -> bool:
            return TaskRun.objects.values_list("status", flat=True).get(pk=run.pk) == TaskRun.Status.DONE

        wait_until(run_over, "the run to end on the second worker", 120, details=worker_log(log))
        items = {i.task.external_id: i for i in run.items.select_related("task")}
        assert all(i.status == TaskRunItem.Status.DONE for i in items.values())
        assert items["t0"].measures["errors"] == {"worker_lost": 1} and items["t0"].measures["success"] is False
        assert items["t1"].measures["success"] is True and items["t2"].measures["errors"] == {"tool_not_loaded": 1}
        assert Conversation.objects.count() == 3  # one conversation per task: none was started twice
        # The model was asked exactly what the script needs: the hung call (still unanswered), then the
        # two other tasks' plans once each — the first task was not run again.
        requests = scripted_api.message_requests
        expected = len(PLANS["Weather forecast for Paris"]["on"]) + len(PLANS["Post 'hi' to the #general Slack channel"]["on"])
        assert requests[0].status == 0 and len(requests) == 1 + expected
        assert all(r.status == 200 for r in requests[1:])
    finally:
        let_go.set()
        for worker in workers:
            worker.stop()
        app.conf.broker_url, app.conf.task_always_eager = previous
