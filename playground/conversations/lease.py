"""The run lease: while a worker runs a conversation's loop, it keeps a heartbeat on the conversation.

Why: a worker killed mid-run (SIGKILL, out of memory, its machine gone) cannot record that it
stopped, so its conversation would stay "running" and refuse every new message. While a run is in
progress, a thread of its worker writes `Conversation.heartbeat_at` every AGENT_HEARTBEAT_SECONDS.
Whoever meets a running conversation whose heartbeat is older than AGENT_LOST_SECONDS releases it
(`runs.release_lost_run`): the page says the worker was lost, the calls it left unanswered get
error results, and the conversation takes messages again. Who looks: every heartbeat thread (once per
AGENT_LOST_SECONDS, for all conversations), a worker when it starts (`tasks.py`), the conversation
page, and cancel and send on that conversation. No scheduler of our own and no Celery beat is needed.
(A run no worker claimed at all has no heartbeat to go stale: requeue.py looks after those.)
Heartbeats carry the writer's clock: hosts must agree within seconds (NTP), far under the minute of
AGENT_LOST_SECONDS.

`run_token` names the run that owns the conversation: `send_message` draws a new one, the task claims
the conversation only while its token is the current one, and a released run's token is cleared. So a
worker that comes back after it was given up on stops at its next step (`AgentRun.check_cancel`)
instead of writing into a newer run, and a duplicate delivery of an old task does nothing.

The same thread carries a cancel to the run at once: every AGENT_CANCEL_POLL_SECONDS it reads the
conversation's status, and when a cancel was asked for (status "cancelling") it sets the run's
`CancelSignal`, which aborts the model call or the MCP tool call in flight (the loop's thread is
blocked in it and could not look). One primary-key read per running conversation and poll.

A run paused on a permission prompt has no worker, so no heartbeat: `rest_paused_run` clears it once
the task has ended (a stale heartbeat would get the waiting run released as lost). The worker that
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
from playground.conversations.runs import ACTIVE_STATUSES, release_lost_runs
from playground.engine.execution import CancelSignal

logger = logging.getLogger(__name__)


def rest_paused_run(conversation_id: int, run_token: str) -> None:
    """After the task that paused this run ended (its heartbeat thread stopped): no heartbeat to watch."""
    Conversation.objects.filter(pk=conversation_id, run_token=run_token, status=Conversation.Status.WAITING,
                                paused_run__isnull=False).update(heartbeat_at=None)


class RunLease:
    """Claim a conversation for one run and keep its heartbeat until the `with` block ends.

    `claimed` is False when the conversation no longer waits for this run (a newer message took it,
    or it was released or cancelled before the worker got to it); the caller then does nothing.
    `cancel` is set when the person asks to cancel while the run holds the lease.
    """

    def __init__(self, conversation_id: int, run_token: str, *, interval: float | None = None,
                 cancel_poll: float | None = None) -> None:
        self.conversation_id = conversation_id
        self.run_token = run_token
        self.interval = settings.AGENT_HEARTBEAT_SECONDS if interval is None else interval
        self.cancel_poll = settings.AGENT_CANCEL_POLL_SECONDS if cancel_poll is None else cancel_poll
        self.claimed = False
        self.beats = 0
        self.cancel = CancelSignal()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _touch(self) -> bool:
        """Write the heartbeat; False when the run no longer owns the conversation."""
        return bool(
            Conversation.objects.filter(pk=self.conversation_id, run_token=self.run_token, status__in=ACTIVE_STATUSES)
            .update(heartbeat_at=timezone.now())
        )

    def __enter__(self) -> RunLease:
        self.claimed = self._touch()
        if self.claimed:
            self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.conversation_id}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval))

    def _cancel_asked(self) -> bool:
        return Conversation.objects.filter(pk=self.conversation_id, run_token=self.run_token,
                                           status=Conversation.Status.CANCELLING).exists()

    def _beat(self) -> None:
        last_sweep = last_beat = time.monotonic()
        tick = min(self.interval, self.cancel_poll)
        try:
            while not self._stop.wait(tick):
                try:
                    if not self.cancel.is_set() and self._cancel_asked():
                        self.cancel.set()  # aborts the call in flight; the loop records the cancel
                    if time.monotonic() - last_beat < self.interval:
                        continue
                    last_beat = time.monotonic()
                    if not self._touch():
                        return  # finished, released or superseded: nothing left to keep alive
                    self.beats += 1
                    if time.monotonic() - last_sweep >= settings.AGENT_LOST_SECONDS:
                        last_sweep = time.monotonic()
                        release_lost_runs()
                except DatabaseError:
                    # A short database outage must not end a healthy run: try again next beat.
                    logger.warning("conversation %s: could not write the heartbeat", self.conversation_id, exc_info=True)
        finally:
            connections.close_all()  # this thread's own connections
