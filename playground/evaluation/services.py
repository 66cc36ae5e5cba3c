"""Starting and running evaluation runs (the Celery task is a thin wrapper around `execute_run`)."""
from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from playground.engine.search import quality
from playground.evaluation import tasks  # a module object: the task calls back into this module
from playground.evaluation.models import EvaluationRun

logger = logging.getLogger(__name__)

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
    )
    transaction.on_commit(lambda: tasks.run_evaluation.delay(run.pk))
    return run


def execute_run(run_id: int) -> EvaluationRun:
    """Run the suite for one stored run, saving progress as it goes and the results at the end."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status not in (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING):
        return run  # a redelivered task for a finished run does nothing
    run.status = EvaluationRun.Status.RUNNING
    run.started_at = timezone.now()
    run.progress = 0.0
    run.progress_message = "loading the toolset and building indexes"
    run.save(update_fields=["status", "started_at", "progress", "progress_message"])

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
