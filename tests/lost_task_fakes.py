"""Fakes shared by the tests of kinds of work whose task the broker lost (playground/lost_tasks.py):
the broker's contents as a list the test fills, the tasks sent again as a list the test reads, and
the watch's settings (a module takes them with `from tests.lost_task_fakes import queue_settings`)."""
from __future__ import annotations

from typing import Any

import pytest

from playground import lost_tasks

GRACE = 15  # seconds a task may sit in the queue before the watch looks for it


@pytest.fixture(autouse=True)
def queue_settings(settings):
    settings.AGENT_QUEUE_GRACE_SECONDS = GRACE
    settings.AGENT_QUEUE_ATTEMPTS = 2


def capture_sent(monkeypatch, task: Any) -> list:
    """The first argument of each `task.delay(...)` from now on."""
    sent: list = []
    monkeypatch.setattr(task, "delay", sent.append)
    return sent


def fake_broker(monkeypatch, task_name: str) -> list:
    """The keys (first task argument) whose `task_name` message the broker holds: fill the list."""
    held: list = []
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds",
                        lambda url, queue, grace: [(task_name, [key]) for key in held])
    return held
