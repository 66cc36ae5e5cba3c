"""A heartbeat a worker keeps on the row of the work it runs, so a killed worker's work can be ended.

Why: a worker killed mid-task (SIGKILL, out of memory, its machine gone) cannot record that it
stopped; an evaluation would stay "running" and a sync "pending" forever. While the task runs, a thread
of its worker calls `touch()` every AGENT_HEARTBEAT_SECONDS; `touch` writes the row's heartbeat time
and says whether the row is still this task's (False ends the thread: finished, failed or taken over).
Each app's sweep (run every round, playground/lost_tasks.py, on Celery beat) ends the rows whose
heartbeat is older than AGENT_LOST_SECONDS with a reason their page shows. Conversations have a lease
of their own with the same settings (conversations/lease.py: it also carries cancels to the run).
Heartbeats carry the writer's clock: hosts must agree within seconds (NTP).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

logger = logging.getLogger(__name__)


def stale_before() -> datetime:
    """Heartbeats older than this belong to a worker that is gone."""
    return timezone.now() - timedelta(seconds=settings.AGENT_LOST_SECONDS)


def silent_for(heartbeat_at: datetime | None) -> int:
    """Whole seconds since the last heartbeat (0 without one)."""
    return int((timezone.now() - heartbeat_at).total_seconds()) if heartbeat_at else 0


def worker_lost_reason(what: str, heartbeat_at: datetime | None) -> str:
    return (f"The worker running this {what} stopped answering (no heartbeat for {silent_for(heartbeat_at)} s: "
            "killed, out of memory or its machine gone)")


class Heartbeat:
    """`with Heartbeat(touch, what=...)`: call `touch()` from a thread every interval until the block ends."""

    def __init__(self, touch: Callable[[], bool], *, what: str, interval: float | None = None) -> None:
        self.touch = touch
        self.what = what
        self.interval = settings.AGENT_HEARTBEAT_SECONDS if interval is None else interval
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {what}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(5.0, 2 * self.interval))

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    if not self.touch():
                        return  # no longer this task's row: nothing left to keep alive
                    self.beats += 1
                except DatabaseError:
                    # A short database outage must not end healthy work: try again next beat.
                    logger.warning("%s: could not write the heartbeat", self.what, exc_info=True)
        finally:
            connections.close_all()  # this thread's own connections
