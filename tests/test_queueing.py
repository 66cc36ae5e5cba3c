"""queue_task: a task queued by its registered name, as a direct `.delay` would queue it."""
from __future__ import annotations

import pytest

from playground.celery_app import app
from playground.queueing import queue_task


def test_the_registered_task_object_is_queued_so_doubles_and_eager_mode_apply(monkeypatch):
    sent = []
    app.loader.import_default_modules()
    task = app.tasks["evaluation.run_evaluation"]
    monkeypatch.setattr(task, "delay", lambda *args, **kwargs: sent.append((args, kwargs)))
    queue_task("evaluation.run_evaluation", 7, extra=1)
    assert sent == [((7,), {"extra": 1})]


def test_an_unknown_name_is_a_clear_key_error():
    with pytest.raises(KeyError, match="no.such_task"):
        queue_task("no.such_task")
