"""Where a worker process runs its conversations: many at once on the process's event loop.

Celery stays the dispatcher: the run task (tasks.py) claims the conversation's lease and hands the run
to this host, then ends once the run first waits (so a process busy building its runs' turns looks
busy to the broker, and the node's other processes take the next runs); its pool slot is then free. The run itself — the
plain, synchronous agent loop — executes in a greenlet on the process's one event loop
(`per_process.Portal.start_run`); while it waits on the model API, an MCP tool call or a paced reply,
it yields to the loop and holds no thread. A permission prompt ends the run (loop.AgentRun.pause), so
a prompt holds nothing at all. The process's lease keeper (lease.py) beats all its runs' leases in one
thread and carries cancels to them.

Bounded: at most AGENT_RUNS_PER_PROCESS runs per process. A full process keeps the task that brought
one more waiting until a run ends (its pool slot is taken meanwhile, so the broker hands further
messages to the node's other processes). Resources per process do not grow with its runs: database
connections are the task thread's, the loop thread's (every run shares it; none waits inside a
transaction) and the keeper's. A worker stopping waits for its runs (warm shutdown,
`finish_runs_before_exit`), up to AGENT_LOST_SECONDS; a run still going then is released as lost,
as for a killed worker.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Any

from django.conf import settings
from django.db import connections
from django.dispatch import Signal

from playground.conversations import replays
from playground.conversations.lease import RunLease, rest_paused_run
from playground.conversations.loop import run_conversation
from playground.per_process import PerProcess, portal

logger = logging.getLogger(__name__)

# Sent (sender=RunHost, conversation_id=…) when a run on the loop has ended or paused: what a Celery
# task's end meant before runs outlived their tasks (task runs take their next step on it).
run_ended = Signal()


def run_leased(lease: RunLease, resume_prompt: int | None = None) -> str:
    """The run of a claimed lease, to its end (or its pause); the outcome's reason. Once the lease is
    let go: a paused run rests; a replay whose run answered sends its next message (replays.py)."""
    try:
        reason = run_conversation(lease.conversation_id, resume_prompt=resume_prompt, cancel=lease.cancel).reason
    finally:
        lease.release()
    if reason == "waiting":
        rest_paused_run(lease.conversation_id, lease.run_token)
    elif reason in replays.FINISHED_REASONS:
        replays.send_next_message(lease.conversation_id)
    return reason


def _mend_connections() -> None:
    """Before a run on the loop: drop the shared connection if an error left it unusable (what Django
    does around a request; here the runs share one connection that outlives each of them)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred and not connection.in_atomic_block:
            if connection.is_usable():
                connection.errors_occurred = False
            else:
                connection.close()


def _run_on_loop(lease: RunLease, resume_prompt: int | None) -> str:
    _mend_connections()
    try:
        return run_leased(lease, resume_prompt)
    finally:
        run_ended.send_robust(RunHost, conversation_id=lease.conversation_id)


# How long a hand-over waits for its run's first wait (beyond it the task ends all the same).
FIRST_TURN_WAIT_SECONDS = 30.0


class RunHost:
    """This process's runs on its event loop, at most `capacity` at once."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._slots = threading.BoundedSemaphore(capacity)
        self._lock = threading.Lock()
        self._running: set[concurrent.futures.Future] = set()

    def start(self, conversation_id: int, run_token: str, resume_prompt: int | None = None) -> concurrent.futures.Future | None:
        """Claim the conversation for this run and start it on the loop; None when the run no longer
        owns the conversation (superseded, released or cancelled before a worker got to it)."""
        self._slots.acquire()  # a full process: the task waits here for a run to end
        try:
            lease = RunLease(conversation_id, run_token)
            if not lease.claim():
                self._slots.release()
                return None
            first_wait = threading.Event()
            future = portal().start_run(_run_on_loop, lease, resume_prompt, on_first_wait=first_wait.set)
        except BaseException:
            self._slots.release()
            raise
        with self._lock:
            self._running.add(future)
        future.add_done_callback(self._ended)
        future.add_done_callback(lambda _: first_wait.set())
        # The task (and so its pool slot) waits while the run's first turn is built: a process whose
        # loop is busy with its runs' CPU work looks busy to the broker, which hands the next run to
        # the node's other processes (a hand-over that ended at once left one process most of them).
        first_wait.wait(FIRST_TURN_WAIT_SECONDS)
        return future

    def _ended(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._running.discard(future)
        self._slots.release()
        if not future.cancelled() and future.exception() is not None:
            logger.error("a conversation run failed outside the loop", exc_info=future.exception())

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def wait_for_runs(self, timeout: float) -> int:
        """Wait up to `timeout` s for the runs in flight to end; how many still run."""
        with self._lock:
            running = list(self._running)
        _, still = concurrent.futures.wait(running, timeout=timeout)
        return len(still)


_hosts: PerProcess[RunHost] = PerProcess(lambda: RunHost(settings.AGENT_RUNS_PER_PROCESS))


def run_host() -> RunHost:
    """This process's host (a forked Celery child makes its own, on its own loop)."""
    return _hosts.get()


def finish_runs_before_exit(**_: Any) -> None:
    """A worker process stopping (warm shutdown): let its runs end first, as Celery lets a task end."""
    host = _hosts.made()
    if host is None or not host.running():
        return
    logger.warning("waiting up to %g s for %d conversation run(s) to end", settings.AGENT_LOST_SECONDS, host.running())
    left = host.wait_for_runs(settings.AGENT_LOST_SECONDS)
    if left:
        logger.warning("%d conversation run(s) still going at exit: they will be released as lost", left)
