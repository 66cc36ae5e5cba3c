"""The run lease: while a worker process runs a conversation's loop, it keeps a heartbeat on the conversation.

Why: a worker killed mid-run (SIGKILL, out of memory, its machine gone) cannot record that it
stopped, so its conversation would stay "running" and refuse every new message. While a run is in
progress, its process writes `Conversation.heartbeat_at` every AGENT_HEARTBEAT_SECONDS. A running
conversation whose heartbeat is older than AGENT_LOST_SECONDS lost its worker and is released
(`runs.release_lost_run`): the page says the worker was lost, the calls it left unanswered get
error results, and the conversation takes messages again. Who looks: Celery beat's background round
(every half AGENT_QUEUE_GRACE_SECONDS, for all conversations: requeue.py), a worker when it starts
(`tasks.py`), the conversation page, and cancel and send on that conversation. A process beats only
its own runs' leases; it never sweeps other runs (that is beat's one path for background work).
Heartbeats carry the writer's clock: hosts must agree within seconds (NTP), far under the minute of
AGENT_LOST_SECONDS.

One keeper per process for all its runs (`LeaseKeeper`): a process may carry many runs at once, so
a thread and a database connection per run would grow with the runs. The keeper's one thread reads the status of every run it holds in one query each
AGENT_CANCEL_POLL_SECONDS, and writes every due heartbeat in one UPDATE: one connection per process,
however many runs. It ends (closing its connection) when the process holds no run.

`run_token` names the run that owns the conversation: `send_message` draws a new one, the task claims
the conversation only while its token is the current one, and a released run's token is cleared. So a
worker that comes back after it was given up on stops at its next step (`AgentRun.check_cancel`)
instead of writing into a newer run, and a duplicate delivery of an old task does nothing.

The keeper carries a cancel to the run at once: when a run's conversation reads "cancelling" it sets
the run's `CancelSignal`, which aborts the model call or the MCP tool call in flight.

A run paused on a permission prompt has no worker, so no heartbeat: `rest_paused_run` clears it once
the run has ended (a stale heartbeat would get the waiting run released as lost). The worker that
resumes it claims it again with the same token.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from playground.conversations.models import Conversation
from playground.conversations.runs import ACTIVE_STATUSES
from playground.engine.execution import CancelSignal
from playground.per_process import PerProcess

logger = logging.getLogger(__name__)


def rest_paused_run(conversation_id: int, run_token: str) -> None:
    """After the run that paused ended (its lease let go): no heartbeat to watch."""
    Conversation.objects.filter(pk=conversation_id, run_token=run_token, status=Conversation.Status.WAITING,
                                paused_run__isnull=False).update(heartbeat_at=None)


class RunLease:
    """Claim a conversation for one run and keep its heartbeat (through the process's keeper) until
    the `with` block ends, or `release()`.

    `claimed` is False when the conversation no longer waits for this run (a newer message took it,
    or it was released or cancelled before the worker got to it); the caller then does nothing.
    `cancel` is set when the person asks to cancel while the run holds the lease. `beats` counts the
    heartbeats written after the claim; `held` turns False once the run no longer owns the conversation.
    """

    def __init__(self, conversation_id: int, run_token: str, *, interval: float | None = None,
                 cancel_poll: float | None = None) -> None:
        self.conversation_id = conversation_id
        self.run_token = run_token
        self.interval = settings.AGENT_HEARTBEAT_SECONDS if interval is None else interval
        self.cancel_poll = settings.AGENT_CANCEL_POLL_SECONDS if cancel_poll is None else cancel_poll
        self.claimed = False
        self.held = False
        self.beats = 0
        self.last_beat = 0.0
        self.cancel = CancelSignal()

    def claim(self) -> bool:
        """Write the first heartbeat and hand the lease to the keeper; False when the run no longer owns it."""
        self.claimed = bool(
            Conversation.objects.filter(pk=self.conversation_id, run_token=self.run_token, status__in=ACTIVE_STATUSES)
            .update(heartbeat_at=timezone.now())
        )
        if self.claimed:
            self.held, self.last_beat = True, time.monotonic()
            keeper().hold(self)
        return self.claimed

    def release(self) -> None:
        self.held = False
        keeper().let_go(self)

    def __enter__(self) -> RunLease:
        self.claim()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class LeaseKeeper:
    """This process's one thread beating the leases of all its runs and carrying cancels to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: set[RunLease] = set()
        self._wake = threading.Event()
        self.thread: threading.Thread | None = None

    def hold(self, lease: RunLease) -> None:
        with self._lock:
            self._leases.add(lease)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._keep, name="run-leases", daemon=True)
                self.thread.start()
        self._wake.set()  # a lease with a shorter poll than the others: look again now

    def let_go(self, lease: RunLease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def holding(self) -> int:
        with self._lock:
            return len(self._leases)

    def _keep(self) -> None:
        try:
            while True:
                with self._lock:
                    leases = list(self._leases)
                    if not leases:
                        self.thread = None  # the next hold starts a new one
                        return
                tick = min(min(lease.interval, lease.cancel_poll) for lease in leases)
                self._wake.wait(tick)
                self._wake.clear()
                try:
                    self.look(leases)
                except DatabaseError:
                    # A short database outage must not end healthy runs: try again next tick.
                    logger.warning("could not look after %d run lease(s)", len(leases), exc_info=True)
        finally:
            connections.close_all()  # this thread's own connection

    def look(self, leases: list[RunLease]) -> None:
        """One read of every held run's conversation; cancels carried; due heartbeats in one write."""
        leases = [lease for lease in leases if lease.held]
        if not leases:
            return
        rows = Conversation.objects.filter(pk__in={lease.conversation_id for lease in leases}).values_list(
            "pk", "run_token", "status")
        state = {(pk, token): status for pk, token, status in rows}
        now = time.monotonic()
        due: list[RunLease] = []
        for lease in leases:
            status = state.get((lease.conversation_id, lease.run_token))
            if status not in ACTIVE_STATUSES:
                lease.held = False  # finished, released or superseded: nothing left to keep alive
                self.let_go(lease)
                continue
            if status == Conversation.Status.CANCELLING and not lease.cancel.is_set():
                lease.cancel.set()  # aborts the call in flight; the loop records the cancel
            if now - lease.last_beat >= lease.interval:
                due.append(lease)
        if not due:
            return
        written = Conversation.objects.filter(
            pk__in={lease.conversation_id for lease in due}, run_token__in={lease.run_token for lease in due},
            status__in=ACTIVE_STATUSES).update(heartbeat_at=timezone.now())
        if written:
            for lease in due:
                lease.beats += 1
                lease.last_beat = now


_keepers: PerProcess[LeaseKeeper] = PerProcess(LeaseKeeper)


def keeper() -> LeaseKeeper:
    """This process's lease keeper (a forked Celery child makes its own)."""
    return _keepers.get()
