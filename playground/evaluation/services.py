"""Starting and running evaluation runs (the Celery task is a thin wrapper around `execute_run`).

A run is queued (its task handed to the broker) and claimed by the one worker that turns it from
queued to running. A queued run whose task the broker lost (a Redis restart) is sent again by the
background round (Celery beat), a few times, then failed with a reason the page shows (playground/lost_tasks.py);
a running run whose worker died (its heartbeat went stale) is failed by the same round.
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
from playground.heartbeat import Heartbeat, stale_before, worker_lost_reason
from playground.queueing import queue_task
from playground.engine.search import quality
from playground.evaluation.models import EvaluationRun
from playground.registry import labelled_sets

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
        status=EvaluationRun.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now(),
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
        with Heartbeat(lambda: touch_run(run_id), what=f"evaluation run {run_id}"):
            results = quality.run_suite(
                [run.toolset],
                run.backends,
                [run.query_style],
                split=run.split,
                limit=run.query_limit,
                progress=progress,
                registry=registry,
                usage_from=run.usage_from,
                load=load_toolset,
            )
    except Exception as exc:  # the page shows what went wrong; the worker keeps going
        logger.exception("evaluation run %s failed", run_id)
        _finish(run_id, status=EvaluationRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        return EvaluationRun.objects.get(pk=run_id)
    # Where the default backend is not the best, with the queries that make it (the page says so plainly).
    gaps = [gap.to_dict() for gap in quality.default_gaps(results, settings.TOOLSEARCH_DEFAULT_BACKEND)]
    _finish(run_id, status=EvaluationRun.Status.DONE, results={"rows": [r.to_dict() for r in results], "gaps": gaps,
                                                                "default_backend": settings.TOOLSEARCH_DEFAULT_BACKEND}, progress=1.0,
            progress_message=f"done: {sum(r.queries for r in results)} searches")
    return EvaluationRun.objects.get(pk=run_id)


def load_toolset(name: str):
    """A shared toolset from its folder, or a profile's own labelled set (`profile:<id>`) over its catalog."""
    if name.startswith(labelled_sets.PROFILE_TOOLSET_PREFIX):
        return labelled_sets.profile_toolset(name)
    return quality.load_toolset(name)


def _finish(run_id: int, **fields) -> None:
    """End a running run; a run the sweep already failed (its heartbeat went stale) keeps that ending."""
    EvaluationRun.objects.filter(pk=run_id, status=EvaluationRun.Status.RUNNING).update(finished_at=timezone.now(), **fields)


# -- runs whose worker died (playground/heartbeat.py) -------------------------------------------------
def touch_run(run_id: int) -> bool:
    """The running worker's heartbeat; False once the run is no longer running (done, failed, released)."""
    return bool(EvaluationRun.objects.filter(pk=run_id, status=EvaluationRun.Status.RUNNING)
                .update(heartbeat_at=timezone.now()))


def fail_runs_of_lost_workers() -> int:
    """Fail the running runs whose heartbeat went stale (the sweep, every round); how many."""
    failed = 0
    for run_id in EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING,
                                               heartbeat_at__lt=stale_before()).values_list("pk", flat=True):
        with transaction.atomic():
            run = EvaluationRun.objects.select_for_update().filter(
                pk=run_id, status=EvaluationRun.Status.RUNNING, heartbeat_at__lt=stale_before()).first()
            if run is None:
                continue  # it beat meanwhile, or finished
            EvaluationRun.objects.filter(pk=run_id).update(
                status=EvaluationRun.Status.FAILED, finished_at=timezone.now(), progress_message="",
                error=f"{worker_lost_reason('evaluation', run.heartbeat_at)}. Start the evaluation again.")
        logger.warning("evaluation run %s: its worker stopped answering; the run failed", run_id)
        failed += 1
    return failed


LOST_WORKERS = lost_tasks.sweep("evaluation runs whose worker died", fail_runs_of_lost_workers)


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
