"""Celery task: one run of the agent loop per person's message (the loop itself lives in loop.py)."""
from __future__ import annotations

import logging

from celery.signals import worker_ready

from playground.celery_app import app
from playground.conversations.lease import RunLease
from playground.conversations.loop import run_conversation
from playground.conversations.services import release_lost_runs

logger = logging.getLogger(__name__)


@app.task(name="conversations.run_conversation", acks_late=False)
def run_conversation_task(conversation_id: int, run_token: str = "") -> str:
    # acks_late off: a redelivered run would repeat tool calls that already happened.
    with RunLease(conversation_id, run_token) as lease:
        if not lease.claimed:
            # A newer message, a cancel or a release took the conversation before this worker got here.
            return "superseded"
        return run_conversation(conversation_id).reason


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
