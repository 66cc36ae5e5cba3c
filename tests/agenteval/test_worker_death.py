"""A real worker process is killed while it runs one of a task run's conversations: the background
round on a new worker releases that conversation and the task goes on in it from what it stored, then
the run finishes the other tasks — every task ends once with a result, none is run twice, no
conversation or event is duplicated (the Messages API double counts the model calls)."""
from __future__ import annotations

import os
import threading

import pytest
from django.conf import settings as django_settings

from playground.agenteval import services
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.celery_app import app
from playground.conversations.models import Conversation, Event
from tests.agenteval.conftest import PLANS, SLACK, TIME, WEATHER, scripted_model
from tests.conversations.conftest import redis  # noqa: F401 - the fixture, used by name
from tests.conversations.test_lost_worker import WorkerProcess, database_url, worker_log
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
HEARTBEAT, LOST, GRACE = 0.2, 1.0, 1.0


def test_a_killed_workers_task_goes_on_from_its_saved_state_once(redis, settings, tool_world, claude_profiles,  # noqa: F811 - the fixture
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
        let_go.wait(600)  # until the test ends (set in `finally`): on a busy machine the run takes minutes
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
        items = {i.task.external_id: i for i in run.items.select_related("task", "conversation")}
        assert all(i.status == TaskRunItem.Status.DONE for i in items.values())
        # The first task was resumed in its own conversation and succeeded there: no error left.
        assert items["t0"].measures["resumed"] == 1 and items["t0"].measures["errors"] == {}
        assert items["t0"].measures["success"] is True and items["t0"].measures["end_reason"] == "end_turn"
        assert items["t1"].measures["success"] is True and items["t2"].measures["errors"] == {"tool_not_loaded": 1}
        assert items["t1"].measures["resumed"] == items["t2"].measures["resumed"] == 0
        assert Conversation.objects.count() == 3  # one conversation per task: none was started twice
        for item in items.values():
            events = list(Event.objects.filter(conversation=item.conversation).order_by("sequence"))
            assert [e.sequence for e in events] == list(range(1, len(events) + 1))  # no gap, none twice
            assert sum(1 for e in events if e.type == "turn_finished" and e.payload.get("final")) == 1  # ended once
            calls = [e.payload["tool_use_id"] for e in events if e.type == "tool_call"]
            assert len(calls) == len(set(calls))  # no tool call recorded (or run) twice
            assert item.conversation.messages.filter(role="user", position=1).count() == 1
            assert sum(1 for e in events if e.type == "message" and e.payload["role"] == "user") == 1
        lost = [e for e in Event.objects.filter(conversation=items["t0"].conversation, type="error")]
        assert [e.payload["kind"] for e in lost] == ["worker_lost"]
        # The model was asked exactly what the script needs: the hung call (still unanswered), the first
        # task's whole plan once more from its saved state, and the two other tasks' plans once each.
        requests = scripted_api.message_requests
        expected = sum(len(PLANS[query]["on"]) for query in PLANS if query != "Open a GitHub issue titled 'Login broken'")
        assert requests[0].status == 0 and len(requests) == 1 + expected
        assert all(r.status == 200 for r in requests[1:])
    finally:
        let_go.set()
        for worker in workers:
            worker.stop()
        app.conf.broker_url, app.conf.task_always_eager = previous
