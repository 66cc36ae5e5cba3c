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


def test_callers_racing_before_the_tasks_are_imported_all_find_their_task(monkeypatch):
    """The first caller imports the tasks modules; one that arrives meanwhile waits for it, not for nothing."""
    import threading
    import time

    from playground import queueing

    app.loader.import_default_modules()
    registered = dict(app.tasks)
    imported = threading.Event()
    hidden = {"evaluation.run_evaluation"}

    class Registry(dict):
        def __contains__(self, name):
            return name not in hidden and super().__contains__(name)

        def __getitem__(self, name):
            if name in hidden:
                raise KeyError(name)
            return super().__getitem__(name)

    started = []

    def slow_import():
        # Like Python's imports under way in another thread: a second call finds the work started and
        # returns at once, before the first has registered anything.
        if started:
            return
        started.append(1)
        time.sleep(0.2)
        hidden.clear()
        imported.set()

    monkeypatch.setattr(queueing, "app", type("App", (), {"tasks": Registry(registered),
                                                          "loader": type("Loader", (), {"import_default_modules": staticmethod(slow_import)})()})())
    found, errors = [], []

    def caller():
        try:
            found.append(queueing.task_named("evaluation.run_evaluation"))
        except KeyError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == [] and len(found) == 4 and imported.is_set()
