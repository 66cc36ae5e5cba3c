"""Celery side of task runs: the run's own step task, the hook that advances a run when one of its
conversations' runs ends, and the background round's sweep that keeps every active run moving (a lost task,
a worker that died mid-conversation)."""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from celery.signals import task_postrun
from django.db import connections
from django.dispatch import receiver

from playground import lost_tasks
from playground.agenteval import services
from playground.celery_app import app
from playground.conversations.run_host import run_ended
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


def advance_after(conversation_id: int, *, inline: bool) -> None:
    """A conversation's run (or its resumption) ended: its task run takes a quick step at once (answer
    a prompt, start the next task in its place), and this process's measuring thread the full step
    (record the ended task's measures, end the run); `inline`: the whole step here."""
    try:
        run_id = services.advance_run_of_conversation(conversation_id, measure=inline)
    except Exception:  # the background round's sweep advances the run
        logger.exception("could not advance the task run of conversation %s", conversation_id)
        return
    if run_id is not None and not inline:
        _measuring.get().submit(_measure, run_id)


@task_postrun.connect
def advance_after_eager_conversation(sender=None, args=None, **_: object) -> None:
    """A conversation task called eagerly ran its whole run in the caller's thread: step here. On a
    worker the task only hands the run over (run_host.py); `run_ended` says when it has ended."""
    if getattr(sender, "name", "") not in CONVERSATION_TASKS or not args:
        return
    request = getattr(sender, "request", None)
    if getattr(request, "is_eager", False) or getattr(request, "called_directly", False):
        advance_after(int(args[0]), inline=True)


@receiver(run_ended)
def advance_after_run(conversation_id: int, **_: object) -> None:
    advance_after(conversation_id, inline=False)


RUNS = lost_tasks.sweep("task runs", services.advance_active_runs)
