"""Celery tasks: one run of the agent loop per person's message (the loop itself lives in loop.py),
its resumption after a permission prompt is answered, and the prompt's timeout.

A run that meets an "ask" rule saves where it is and ends its task (loop.AgentRun.pause): an open
prompt holds no worker. The answer — from the page, or the timeout the background round gives a prompt
past its deadline (requeue.py) — queues `resume_conversation_task`, which goes on from the saved state
under the same run token.
"""
from __future__ import annotations

import logging

from celery.signals import worker_ready

from playground.celery_app import app
from playground.conversations import replays, requeue  # noqa: F401 - requeue registers runs and prompts with the background round
from playground.conversations.lease import RunLease, rest_paused_run
from playground.conversations.loop import run_conversation
from playground.conversations.runs import expire_prompt, release_lost_runs
from playground.conversations.sampling import answer_sampling_request

logger = logging.getLogger(__name__)


@app.task(name="conversations.run_conversation", acks_late=False)
def run_conversation_task(conversation_id: int, run_token: str = "") -> str:
    # acks_late off: a redelivered run would repeat tool calls that already happened.
    with RunLease(conversation_id, run_token) as lease:
        if not lease.claimed:
            # A newer message, a cancel or a release took the conversation before this worker got here.
            return "superseded"
        reason = run_conversation(conversation_id, cancel=lease.cancel).reason
    return _after_run(conversation_id, run_token, reason)


@app.task(name="conversations.resume_conversation", acks_late=False)
def resume_conversation_task(conversation_id: int, run_token: str, prompt_sequence: int) -> str:
    """Go on with a run paused on permission prompt `prompt_sequence`, now answered."""
    with RunLease(conversation_id, run_token) as lease:
        if not lease.claimed:
            return "superseded"  # cancelled, released or taken over while the answer was queued
        reason = run_conversation(conversation_id, resume_prompt=prompt_sequence, cancel=lease.cancel).reason
    return _after_run(conversation_id, run_token, reason)


def _after_run(conversation_id: int, run_token: str, reason: str) -> str:
    """Once the lease is let go: a paused run rests; a replay whose run answered sends its next message."""
    if reason == "waiting":
        rest_paused_run(conversation_id, run_token)
    elif reason in replays.FINISHED_REASONS:
        replays.send_next_message(conversation_id)
    return reason


@app.task(name="conversations.expire_permission_prompt")
def expire_permission_prompt_task(conversation_id: int, prompt_sequence: int) -> bool:
    """Deny the prompt if it is still open. Nothing schedules it any more (the round's deadline sweep
    does this, requeue.py); it stays for messages a persistent Redis still holds from before, and
    does nothing to a prompt the sweep already answered."""
    return expire_prompt(conversation_id, prompt_sequence)


@worker_ready.connect
def release_runs_of_lost_workers(**_: object) -> None:
    """A worker starting (often one restarted after a crash) frees the conversations dead workers left."""
    try:
        released = release_lost_runs()
    except Exception:
        logger.exception("could not look for conversations of lost workers")
        return
    if released:
        logger.warning("released %d conversation(s) whose worker stopped answering", released)


@app.task(name="conversations.answer_sampling_request")
def answer_sampling_request_task(request_id: int, profile_id: int, user_id: int | None = None) -> str:
    """A profile's model answers an MCP server's sampling request from the workbench (sampling.py)."""
    return answer_sampling_request(request_id, profile_id, user_id)
