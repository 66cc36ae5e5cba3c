"""Live progress of a task run: after each step commits, the run's panel and the per-task grid's
cells that changed are rendered (the same templates the page includes) and pushed to the sockets
watching it. Nothing to replay: a socket that connects is sent the current panel and every cell, a
reload renders them again.

The step usually runs on a worker right after one of the run's conversations (a Celery
`task_postrun` hook), and that worker process takes no task until the hook returns: rendering and
sending there (some 50 ms) would delay the run's next conversation every time. So a step only
notes the run (`send_progress_soon`) and one thread per process renders and sends, at most every
half second, coalescing the steps of a run that came meanwhile into one frame of the newest state
(rendering the panel reads every task of the run: once per conversation, it competed with the
conversations for the workers' CPU).
"""
from __future__ import annotations

import logging
import os
import threading
import time

from django.db import connections
from django.template.loader import render_to_string

from playground.agenteval import selectors
from playground.agenteval.models import TaskRun
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

FRAME_INTERVAL_SECONDS = 0.5  # at most two frames a second per process: the steps between are coalesced
# A frame carries the grid cells of tasks running or ended this recently: wide enough for the frames
# coalesced meanwhile, a frame another process sent, and clocks a little apart; a socket that joins
# (or joins again) gets every cell.
CELL_SECONDS = 10.0


def run_group(run_id: int) -> str:
    return f"agenteval-run-{run_id}"


def progress_html(run: TaskRun, *, every_cell: bool = False) -> str:
    """The panel, and the per-task grid's cells that changed lately (every cell for a socket that just
    joined), each rendered by the template the page renders it with and swapped in by its id."""
    items = selectors.items_of(run)
    html = render_to_string("agenteval/_panel.html", {**selectors.panel_context(run, items), "oob": True})
    cells = items if every_cell else selectors.changed_lately(items, CELL_SECONDS)
    return html + "".join(render_to_string("agenteval/_grid_cell.html", {"cell": cell, "oob": True}) for cell in cells)


def send_progress(run_id: int) -> None:
    """Render the run's panel now and send it to the run's sockets."""
    run = TaskRun.objects.filter(pk=run_id).first()
    if run is None:
        return
    try:
        send_to_group(run_group(run_id), {"type": "progress.update", "html": progress_html(run)})
    except Exception:  # a page that misses a frame reads the state on reload; the run goes on
        logger.warning("task run %s: could not broadcast progress", run_id, exc_info=True)


class _Sender:
    """One daemon thread per process (started again after a fork) sending the runs noted meanwhile."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.pending: set[int] = set()
        self.thread: threading.Thread | None = None
        self.pid = 0

    def note(self, run_id: int) -> None:
        with self.lock:
            self.pending.add(run_id)
            if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self._drain, name="agenteval-progress", daemon=True)
                self.thread.start()
        self.wake.set()

    def _drain(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            while True:
                with self.lock:
                    if not self.pending:
                        break
                    run_id = self.pending.pop()
                try:
                    send_progress(run_id)
                except Exception:  # the database went away: the next step sends again
                    logger.warning("task run %s: could not read its progress", run_id, exc_info=True)
                finally:
                    connections.close_all()  # this thread's own connections: none is held between frames
            time.sleep(FRAME_INTERVAL_SECONDS)  # steps noted meanwhile go out as one frame of the newest state


_sender = _Sender()


def send_progress_soon(run_id: int) -> None:
    """Have this process's progress thread send the run's panel (after the caller's commit)."""
    _sender.note(run_id)
