"""Evaluation runs whose task the broker lost: sent again by the worker's watch, then failed with a
reason the page shows (playground/lost_tasks.py). The broker is a list the test fills; the real Redis
restart is in tests/conversations/test_broker_restart.py."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from playground import lost_tasks
from playground.evaluation import services, tasks
from playground.evaluation.models import EvaluationRun
from tests.lost_task_fakes import GRACE, capture_sent, fake_broker, queue_settings  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    return capture_sent(monkeypatch, tasks.run_evaluation)


@pytest.fixture
def broker(monkeypatch):
    """The run ids whose task the broker holds."""
    return fake_broker(monkeypatch, "evaluation.run_evaluation")


def queued_run(*, age: float, **fields) -> EvaluationRun:
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], split="all", progress_message="queued", **fields)
    EvaluationRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(seconds=age))
    return run


def two_rounds() -> dict[str, int]:
    _, missing = lost_tasks.lost_round({}, [services.LOST_RUNS])
    outcome, _ = lost_tasks.lost_round(missing, [services.LOST_RUNS])
    return outcome


def test_a_queued_run_the_broker_lost_is_sent_again_and_then_runs_once(
        sent, broker, toy_toolsets, django_capture_on_commit_callbacks):
    run = queued_run(age=GRACE + 5)
    with django_capture_on_commit_callbacks(execute=True):
        first, missing = lost_tasks.lost_round({}, [services.LOST_RUNS])
        assert first["requeued"] == 0 and missing == {("evaluation run", run.pk): str(run.pk)}
        assert lost_tasks.lost_round(missing, [services.LOST_RUNS])[0]["requeued"] == 1
    run.refresh_from_db()
    assert sent == [run.pk] and run.status == "queued" and run.queue_attempts == 1
    assert "queued again: the message broker lost its task" in run.progress_message and "(1 of 2)" in run.progress_message
    assert timezone.now() - run.queued_at < timedelta(seconds=5)  # the next grace counts from the re-send
    assert services.execute_run(run.pk).status == "done"
    # The lost task, should it turn up after all, finds the run claimed and does nothing.
    before = EvaluationRun.objects.get(pk=run.pk).finished_at
    assert services.execute_run(run.pk).finished_at == before


def test_a_run_the_broker_holds_a_young_one_or_a_running_one_is_left_alone(sent, broker):
    waiting = queued_run(age=GRACE + 60)
    broker.append(waiting.pk)
    young = queued_run(age=GRACE - 5)
    running = queued_run(age=GRACE + 60, status="running")
    assert two_rounds() == {"requeued": 0, "failed": 0} and sent == []
    for run in (waiting, young, running):
        assert EvaluationRun.objects.get(pk=run.pk).queue_attempts == 0


def test_a_run_claimed_between_two_rounds_is_not_sent_again(sent, broker, toy_toolsets):
    run = queued_run(age=GRACE + 5)
    _, missing = lost_tasks.lost_round({}, [services.LOST_RUNS])
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")  # what execute_run's claim does
    assert lost_tasks.lost_round(missing, [services.LOST_RUNS])[0] == {"requeued": 0, "failed": 0} and sent == []


def test_after_the_last_attempt_the_run_fails_and_its_page_says_why(sent, broker, viewer_client):
    run = queued_run(age=GRACE + 5, queue_attempts=2)
    assert two_rounds() == {"requeued": 0, "failed": 1} and sent == []
    run.refresh_from_db()
    assert run.status == "failed" and run.finished_at is not None
    assert "No worker started this evaluation" in run.error and "sent again 2 time(s)" in run.error
    body = viewer_client.get(reverse("evaluation:progress", args=[run.pk])).content.decode()
    assert "the message broker lost its task" in body and "hx-trigger" not in body  # stops polling


def test_a_run_queued_while_the_broker_is_down_fails_at_once_with_a_reason(monkeypatch, django_capture_on_commit_callbacks):
    def broker_down(*args):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.run_evaluation, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.start_run(toolset="toy", backends=["bm25"], query_style="natural", split="all", query_limit=None)
    run.refresh_from_db()
    assert run.status == "failed" and "Could not hand the evaluation to a worker (is Redis running?)" in run.error
