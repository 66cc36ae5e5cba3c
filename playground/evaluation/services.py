"""Starting and running evaluation runs (the Celery task is a thin wrapper around `execute_run`).

A run is queued (its task handed to the broker) and claimed by the one worker that turns it from
queued to running. A queued run whose task the broker lost (a Redis restart) is sent again by the
worker's watch, a few times, then failed with a reason the page shows (playground/lost_tasks.py).
"""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from playground import lost_tasks
from playground.queueing import queue_task
from playground.engine.search import quality
from playground.evaluation.models import EvaluationRun

logger = logging.getLogger(__name__)

RUN_TASK = "evaluation.run_evaluation"  # tasks.py; queued by name (tasks.py imports this module)
PROGRESS_SAVE_INTERVAL_S = 0.5  # do not write the row on every query


def start_run(*, toolset: str, backends: list[str], query_style: str, split: str, query_limit: int | None, user=None,
              usage_from: str = "none") -> EvaluationRun:
    """Create the run and queue its task once the row is committed (the worker must see it)."""
    run = EvaluationRun.objects.create(
        toolset=toolset,
        backends=list(backends),
        query_style=query_style,
        split=split,
        query_limit=query_limit,
        usage_from=usage_from,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        progress_message="queued",
        queued_at=timezone.now(),
    )
    transaction.on_commit(lambda: _send(run.pk))
    return run


def _send(run_id: int) -> None:
    try:
        queue_task(RUN_TASK, run_id)
    except Exception as exc:
        logger.exception("could not queue the evaluation run %s", run_id)
        EvaluationRun.objects.filter(pk=run_id, status=EvaluationRun.Status.QUEUED).update(
            status=EvaluationRun.Status.FAILED, finished_at=timezone.now(),
            error=f"Could not hand the evaluation to a worker (is Redis running?): {exc}")


def execute_run(run_id: int) -> EvaluationRun:
    """Run the suite for one stored run, saving progress as it goes and the results at the end."""
    # The claim: only the worker that turns the run from queued to running runs it. A second task for
    # the same run (one the broker redelivered, or one thought lost and sent again) does nothing.
    claimed = EvaluationRun.objects.filter(pk=run_id, status=EvaluationRun.Status.QUEUED).update(
        status=EvaluationRun.Status.RUNNING, started_at=timezone.now(),
        progress_message="loading the toolset and building indexes")
    run = EvaluationRun.objects.get(pk=run_id)
    if not claimed:
        return run

    last_save = 0.0

    def progress(fraction: float, message: str) -> None:
        nonlocal last_save
        now = time.monotonic()
        if now - last_save < PROGRESS_SAVE_INTERVAL_S and fraction < 1.0:
            return
        last_save = now
        EvaluationRun.objects.filter(pk=run_id).update(progress=min(fraction, 0.99), progress_message=message[:200])

    registry = getattr(settings, "TOOLSEARCH_BACKENDS", None)
    try:
        results = quality.run_suite(
            [run.toolset],
            run.backends,
            [run.query_style],
            split=run.split,
            limit=run.query_limit,
            progress=progress,
            registry=registry,
            usage_from=run.usage_from,
        )
    except Exception as exc:  # the page shows what went wrong; the worker keeps going
        logger.exception("evaluation run %s failed", run_id)
        run.refresh_from_db()
        run.status = EvaluationRun.Status.FAILED
        run.error = f"{type(exc).__name__}: {exc}"
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        return run
    run.refresh_from_db()
    run.results = {"rows": [r.to_dict() for r in results]}
    run.status = EvaluationRun.Status.DONE
    run.progress = 1.0
    run.progress_message = f"done: {sum(r.queries for r in results)} searches"
    run.finished_at = timezone.now()
    run.save(update_fields=["results", "status", "progress", "progress_message", "finished_at"])
    return run


# -- runs whose task the broker lost (playground/lost_tasks.py) ------------------------------------
def unclaimed_runs(grace: float) -> dict[int, str]:
    """Runs still queued `grace` seconds after their task was handed to the broker: run id → key."""
    cutoff = timezone.now() - timedelta(seconds=grace)
    rows = (EvaluationRun.objects.filter(status=EvaluationRun.Status.QUEUED)
            .annotate(sent=Coalesce("queued_at", "created_at")).filter(sent__lt=cutoff).values_list("pk", flat=True))
    return {pk: str(pk) for pk in rows}


def requeue_lost_run(run_id: int, key: str) -> str:
    """Send a queued run's task again, or fail the run once AGENT_QUEUE_ATTEMPTS re-sends are used up.
    Re-checked under the row lock: "" when a worker claimed it (or another watch re-sent it) meanwhile."""
    cutoff = timezone.now() - timedelta(seconds=lost_tasks.grace_seconds())
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().filter(pk=run_id, status=EvaluationRun.Status.QUEUED).first()
        if run is None or (run.queued_at or run.created_at) >= cutoff:
            return ""
        sent = run.queued_at or run.created_at
        if lost_tasks.attempts_used(run.queue_attempts):
            reason = lost_tasks.lost_reason((timezone.now() - sent).total_seconds(), run.queue_attempts)
            EvaluationRun.objects.filter(pk=run_id).update(
                status=EvaluationRun.Status.FAILED, finished_at=timezone.now(), progress_message="",
                error=f"No worker started this evaluation: {reason}. Start the evaluation again.")
            return lost_tasks.FAILED
        attempt = run.queue_attempts + 1
        EvaluationRun.objects.filter(pk=run_id).update(
            queued_at=timezone.now(), queue_attempts=F("queue_attempts") + 1,
            progress_message=f"queued again: the message broker lost its task (was Redis restarted?) "
                             f"({attempt} of {settings.AGENT_QUEUE_ATTEMPTS})")
        lost_tasks.send_again(RUN_TASK, run_id, what=f"the evaluation run {run_id}")
    return lost_tasks.REQUEUED


LOST_RUNS = lost_tasks.watch(lost_tasks.Kind(
    name="evaluation run", tasks=frozenset({RUN_TASK}), key_of=lost_tasks.first_arg,
    unclaimed=unclaimed_runs, lost=requeue_lost_run))
