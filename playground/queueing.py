"""Queue a Celery task by its registered name.

A module that defines a task imports the services the task runs; if those services imported the task
module back to queue it, the app's modules would form an import circle (docs/architecture.md). So
callers name the task instead. The registered task object is looked up (not `app.send_task`), so
eager mode and a test's double of `.delay` apply exactly as to a direct call.
"""
from __future__ import annotations

import threading

from celery import Task
from celery.result import AsyncResult

from playground.celery_app import app

# Two requests of one web process may both find the tasks not yet imported: the second must wait for
# the first's imports to register every task, not look in the registry half-way (NotRegistered).
_discovering = threading.Lock()


def queue_task(name: str, *args, **kwargs) -> AsyncResult:
    """`.delay(*args, **kwargs)` on the task registered as `name` (a KeyError names an unknown task)."""
    return task_named(name).delay(*args, **kwargs)


def task_named(name: str) -> Task:
    """The task registered as `name`, for a caller that hands the task on (a KeyError names an unknown task)."""
    if name not in app.tasks:
        with _discovering:
            if name not in app.tasks:
                # A web process has imported no tasks module yet: Celery's autodiscovery runs on this signal.
                app.loader.import_default_modules()
    return app.tasks[name]
