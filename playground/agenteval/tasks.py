"""Celery side of task runs: the run's own step task, the hook that advances a run when one of its
conversations' tasks ends, and the background round's sweep that keeps every active run moving (a lost task,
a worker that died mid-conversation)."""
from __future__ import annotations

import logging

from celery.signals import task_postrun

from playground import lost_tasks
from playground.agenteval import services
from playground.celery_app import app

logger = logging.getLogger(__name__)

CONVERSATION_TASKS = frozenset({"conversations.run_conversation", "conversations.resume_conversation"})


@app.task(name="agenteval.advance_run")
def advance_run(run_id: int) -> str:
    run = services.advance(run_id)
    return run.status if run is not None else "missing"


@task_postrun.connect
def advance_after_conversation(sender=None, args=None, **_: object) -> None:
    """A conversation's run (or its resumption) ended on this worker: its task run takes its next step
    at once (answer a prompt, record the measures, start the next task)."""
    if getattr(sender, "name", "") not in CONVERSATION_TASKS or not args:
        return
    try:
        services.advance_run_of_conversation(int(args[0]))
    except Exception:  # the background round's sweep advances the run
        logger.exception("could not advance the task run of conversation %s", args[0])


RUNS = lost_tasks.sweep("task runs", services.advance_active_runs)
