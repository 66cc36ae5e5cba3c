"""One object per process, made on first use.

Event loops on background threads, the channel layer's sender and the MCP session pool are each
kept once per process. A forked child (Celery's prefork pool) must not use its parent's: the
parent's threads do not exist in the child, and its sockets belong to the parent. So the child
forgets the parent's object without closing it and makes its own on first use.
"""
from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """`get()` returns this process's object, made by `make()` the first time; `close(obj)` runs at
    exit on the object this process made (never on one a parent made before forking)."""

    def __init__(self, make: Callable[[], T], *, close: Callable[[T], None] | None = None) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._value: T | None = None
        self._pid = 0
        os.register_at_fork(after_in_child=self._forget)
        if close is not None:
            atexit.register(self._close, close)

    def get(self) -> T:
        value = self._value
        if value is not None and self._pid == os.getpid():
            return value
        with self._lock:
            if self._value is None or self._pid != os.getpid():
                self._value, self._pid = self._make(), os.getpid()
            return self._value

    def made(self) -> T | None:
        """The object this process made, or None if it has made none yet."""
        value = self._value
        return value if value is not None and self._pid == os.getpid() else None

    def _forget(self) -> None:
        # In the child: abandon the parent's object (closing it would touch the parent's connections),
        # and the lock, which a parent thread may have held at the fork.
        self._value, self._lock = None, threading.Lock()

    def _close(self, close: Callable[[T], None]) -> None:
        value = self.made()
        if value is not None:
            close(value)
