"""Waiting on a condition with a deadline: the one polling helper of the tests (no fixed sleeps).

    row = wait_until(lambda: Event.objects.filter(type="status").first(), "the final status event", 30)

`condition` is called every `interval` seconds until it returns something truthy, which is returned;
after `timeout` seconds the test fails naming `what` (and, when given, what `details()` says at that
moment: a log's tail, the rows seen so far).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, timeout: float = 60.0, *, interval: float = 0.05,
               details: Callable[[], Any] | None = None) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            message = f"not within {timeout:g} s: {what}"
            if details is not None:
                message += f"\n{details()}"
            raise AssertionError(message)
        time.sleep(interval)
