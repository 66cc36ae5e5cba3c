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
conversations for the workers' CPU). And only while a socket watches the run (a count in Redis the
consumer keeps): a run from the command line, or one nobody has open, renders no frame at all —
profiled, the frames were about a third of a task run's own work on the workers.
"""
from __future__ import annotations

import logging
import os
import threading
import time

import redis
from django.conf import settings
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
# A count left by a web process that died with sockets open goes after a day (its frames are rendered
# for nobody until then, as they always were).
WATCHERS_TTL_SECONDS = 24 * 3600


def run_group(run_id: int) -> str:
    return f"agenteval-run-{run_id}"


def progress_html(run: TaskRun, *, every_cell: bool = False) -> str:
    """The panel, and the per-task grid's cells that changed lately (every cell for a socket that just
    joined), each rendered by the template the page renders it with and swapped in by its id."""
    items = selectors.items_of(run)
    html = render_to_string("agenteval/_panel.html", {**selectors.panel_context(run, items), "oob": True})
    cells = items if every_cell else selectors.changed_lately(items, CELL_SECONDS)
    return html + "".join(render_to_string("agenteval/_grid_cell.html", {"cell": cell, "oob": True}) for cell in cells)


# -- who watches: a frame nobody would receive is not rendered -------------------------------------------
def _watchers_key(run_id: int) -> str:
    prefix = settings.CHANNEL_LAYERS.get("default", {}).get("CONFIG", {}).get("prefix", "asgi")  # the in-memory layer has none
    return f"{prefix}:agenteval-watchers:{run_id}"


_redis_clients: dict[str, redis.Redis] = {}


def _redis() -> redis.Redis:
    """One pool per process and Redis (redis-py starts it again in a forked child)."""
    client = _redis_clients.get(settings.REDIS_URL)
    if client is None:
        client = _redis_clients[settings.REDIS_URL] = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2,
                                                                           socket_timeout=2)
    return client


def add_watcher(run_id: int) -> None:
    """A socket joined the run's group (consumers.py); counted in Redis, which every process reads."""
    try:
        with _redis().pipeline() as pipe:
            pipe.incr(_watchers_key(run_id)).expire(_watchers_key(run_id), WATCHERS_TTL_SECONDS).execute()
    except (redis.RedisError, OSError):
        logger.warning("task run %s: could not count a watcher; its frames are rendered anyway", run_id, exc_info=True)


def remove_watcher(run_id: int) -> None:
    try:
        _redis().decr(_watchers_key(run_id))
    except (redis.RedisError, OSError):
        logger.warning("task run %s: could not uncount a watcher", run_id, exc_info=True)


def watched(run_id: int) -> bool:
    """Whether a socket watches the run. When Redis cannot say, yes: a frame too many costs less than
    a page that stops following."""
    try:
        return int(_redis().get(_watchers_key(run_id)) or 0) > 0
    except (redis.RedisError, OSError, ValueError):
        return True


def send_progress(run_id: int) -> None:
    """Render the run's panel now and send it to the run's sockets (when some socket watches)."""
    if not watched(run_id):
        return
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
