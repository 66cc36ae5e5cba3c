"""Celery tasks: one run of the agent loop per person's message (the loop itself lives in loop.py),
its resumption after a permission prompt is answered, and the prompt's timeout.

A run that meets an "ask" rule saves where it is and ends its task (loop.AgentRun.pause): an open
prompt holds no worker. The answer — from the page, or `expire_permission_prompt_task` scheduled with
the prompt's timeout as countdown — queues `resume_conversation_task`, which goes on from the saved
state under the same run token.
"""
from __future__ import annotations

import logging

from celery.signals import worker_ready, worker_shutdown

from playground.celery_app import app
from playground.conversations.lease import RunLease, rest_paused_run
from playground.conversations.loop import run_conversation
from playground.conversations.requeue import RequeueWatch
from playground.conversations.services import expire_prompt, release_lost_runs

logger = logging.getLogger(__name__)


@app.task(name="conversations.run_conversation", acks_late=False)
def run_conversation_task(conversation_id: int, run_token: str = "") -> str:
    # acks_late off: a redelivered run would repeat tool calls that already happened.
    with RunLease(conversation_id, run_token) as lease:
        if not lease.claimed:
            # A newer message, a cancel or a release took the conversation before this worker got here.
            return "superseded"
        reason = run_conversation(conversation_id, cancel=lease.cancel).reason
    if reason == "waiting":
        rest_paused_run(conversation_id, run_token)
    return reason


@app.task(name="conversations.resume_conversation", acks_late=False)
def resume_conversation_task(conversation_id: int, run_token: str, prompt_sequence: int) -> str:
    """Go on with a run paused on permission prompt `prompt_sequence`, now answered."""
    with RunLease(conversation_id, run_token) as lease:
        if not lease.claimed:
            return "superseded"  # cancelled, released or taken over while the answer was queued
        reason = run_conversation(conversation_id, resume_prompt=prompt_sequence, cancel=lease.cancel).reason
    if reason == "waiting":
        rest_paused_run(conversation_id, run_token)
    return reason


@app.task(name="conversations.expire_permission_prompt")
def expire_permission_prompt_task(conversation_id: int, prompt_sequence: int) -> bool:
    """Deny the prompt if it is still open (scheduled with the prompt's timeout as countdown)."""
    return expire_prompt(conversation_id, prompt_sequence)


@worker_ready.connect
def release_runs_of_lost_workers(**_: object) -> None:
    """A worker starting (often one restarted after a crash) frees the conversations dead workers left."""
    try:
        released = release_lost_runs()
    except Exception:  # noqa: BLE001 - a sweep that fails must not stop the worker from starting
        logger.exception("could not look for conversations of lost workers")
        return
    if released:
        logger.warning("released %d conversation(s) whose worker stopped answering", released)


_requeue_watch: list[RequeueWatch] = []  # this worker process's watch, while it runs


@worker_ready.connect
def watch_for_lost_tasks(**_: object) -> None:
    """Hand runs whose task the broker lost (a Redis restart) to a worker again (requeue.py); the
    first round runs at once, so a worker starting after an outage picks them up straight away."""
    if not _requeue_watch:
        _requeue_watch.append(RequeueWatch().start())


@worker_shutdown.connect
def stop_watching_for_lost_tasks(**_: object) -> None:
    while _requeue_watch:
        _requeue_watch.pop().stop()
