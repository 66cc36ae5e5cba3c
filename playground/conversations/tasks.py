"""Celery tasks: one run of the agent loop per person's message (the loop itself lives in loop.py),
its resumption after a permission prompt is answered, and the prompt's timeout.

Celery dispatches; the run task claims the conversation and hands the run to its process's run host
(run_host.py), which runs it on the process's event loop, and ends: a waiting run holds no worker
process or thread, and one process carries many runs. Called eagerly or directly (tests, the CPU
benchmark), the task runs the loop in the calling thread and returns its outcome.

A run that meets an "ask" rule saves where it is and ends (loop.AgentRun.pause): an open prompt holds
nothing. The answer — from the page, or the timeout the background round gives a prompt past its
deadline (requeue.py) — queues `resume_conversation_task`, which goes on from the saved state under
the same run token.
"""
from __future__ import annotations

import logging

from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

from playground.celery_app import app
from playground.conversations import requeue  # noqa: F401 - registers runs and prompts with the background round
from playground.conversations.lease import RunLease
from playground.conversations.run_host import finish_runs_before_exit, run_host, run_leased
from playground.conversations.runs import expire_prompt, release_lost_runs
from playground.conversations.sampling import answer_sampling_request

logger = logging.getLogger(__name__)


def hand_over(request, conversation_id: int, run_token: str, resume_prompt: int | None = None) -> str:
    """Start the run on this process's host ("started"), or run it here when the task was called
    eagerly or directly (its outcome); "superseded" when the run no longer owns the conversation."""
    if request.is_eager or request.called_directly:
        lease = RunLease(conversation_id, run_token)
        if not lease.claim():
            return "superseded"
        return run_leased(lease, resume_prompt)
    # acks_late off (below): a redelivered run would repeat tool calls that already happened.
    return "started" if run_host().start(conversation_id, run_token, resume_prompt) is not None else "superseded"


@app.task(name="conversations.run_conversation", acks_late=False, bind=True)
def run_conversation_task(self, conversation_id: int, run_token: str = "") -> str:
    # A newer message, a cancel or a release may have taken the conversation before this worker got here.
    return hand_over(self.request, conversation_id, run_token)


@app.task(name="conversations.resume_conversation", acks_late=False, bind=True)
def resume_conversation_task(self, conversation_id: int, run_token: str, prompt_sequence: int) -> str:
    """Go on with a run paused on permission prompt `prompt_sequence`, now answered."""
    return hand_over(self.request, conversation_id, run_token, prompt_sequence)


worker_process_shutdown.connect(finish_runs_before_exit)  # a prefork child
worker_shutdown.connect(finish_runs_before_exit)  # the solo and threads pools


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
