"""Celery side of task runs: the run's own step task, the hook that advances a run when one of its
conversations' tasks ends, and the background round's sweep that keeps every active run moving (a lost task,
a worker that died mid-conversation)."""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from celery.signals import task_postrun
from django.db import connections

from playground import lost_tasks
from playground.agenteval import services
from playground.celery_app import app
from playground.per_process import PerProcess

logger = logging.getLogger(__name__)

CONVERSATION_TASKS = frozenset({"conversations.run_conversation", "conversations.resume_conversation"})


@app.task(name="agenteval.advance_run")
def advance_run(run_id: int) -> str:
    run = services.advance(run_id)
    return run.status if run is not None else "missing"


def _measuring_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="agenteval-measure")


# One thread per worker process (a forked child makes its own) for the full steps after the quick ones.
_measuring = PerProcess(_measuring_thread, close=lambda pool: pool.shutdown(wait=False))


def _measure(run_id: int) -> None:
    try:
        services.advance(run_id)
    except Exception:  # the background round's sweep advances the run
        logger.exception("could not measure the ended tasks of task run %s", run_id)
    finally:
        connections.close_all()  # this thread's own connections: none is held between steps


@task_postrun.connect
def advance_after_conversation(sender=None, args=None, **_: object) -> None:
    """A conversation's run (or its resumption) ended on this worker: its task run takes a quick step
    at once (answer a prompt, start the next task in its place), and this process's measuring thread
    the full step (record the ended task's measures, end the run) while the worker takes its next task."""
    if getattr(sender, "name", "") not in CONVERSATION_TASKS or not args:
        return
    # Run inline (eager mode: no worker to hand back to), the whole step here, in the caller's thread.
    inline = bool(getattr(getattr(sender, "request", None), "is_eager", False))
    try:
        run_id = services.advance_run_of_conversation(int(args[0]), measure=inline)
    except Exception:  # the background round's sweep advances the run
        logger.exception("could not advance the task run of conversation %s", args[0])
        return
    if run_id is not None and not inline:
        _measuring.get().submit(_measure, run_id)


RUNS = lost_tasks.sweep("task runs", services.advance_active_runs)
