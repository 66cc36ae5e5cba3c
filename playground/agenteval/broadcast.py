"""Live progress of a task run: after each step commits, the run's progress panel is rendered (the
same template the page includes) and pushed to the sockets watching it. Nothing to replay: a socket
that connects is sent the current panel, a reload renders it again."""
from __future__ import annotations

import logging

from django.template.loader import render_to_string

from playground.agenteval import selectors
from playground.agenteval.models import TaskRun
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"agenteval-run-{run_id}"


def progress_html(run: TaskRun) -> str:
    return render_to_string("agenteval/_panel.html", {**selectors.panel_context(run), "oob": True})


def send_progress(run_id: int) -> None:
    run = TaskRun.objects.filter(pk=run_id).first()
    if run is None:
        return
    try:
        send_to_group(run_group(run_id), {"type": "progress.update", "html": progress_html(run)})
    except Exception:  # a page that misses a frame reads the state on reload; the run goes on
        logger.warning("task run %s: could not broadcast progress", run_id, exc_info=True)
