"""One object per process, made on first use; and the process's one event loop for sync code (`portal()`).

The event loop on a background thread, the channel layer's sender and the MCP session pool are each
kept once per process. A forked child (Celery's prefork pool) must not use its parent's: the
parent's threads do not exist in the child, and its sockets belong to the parent. So the child
forgets the parent's object without closing it and makes its own on first use.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")
_ABANDONED: list[object] = []  # a forked child's inherited objects of its parent: kept, never closed


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
        # and the lock, which a parent thread may have held at the fork. The object is kept referenced,
        # never collected: a finaliser would run its close in the child (a portal's waits on its
        # loop thread, which does not exist here, forever).
        if self._value is not None:
            _ABANDONED.append(self._value)
        self._value, self._lock = None, threading.Lock()

    def _close(self, close: Callable[[T], None]) -> None:
        value = self.made()
        if value is not None:
            close(value)


class Portal:
    """This process's event loop for sync code: an anyio blocking portal (an asyncio loop on a daemon
    thread). The realtime sender's channel layer (realtime.py) and the MCP client's sessions
    (mcp_servers/connection.py) both live on it; async clients bound to a loop (channels_redis,
    httpx, the MCP SDK) keep their connections across calls because the loop outlives each call."""

    def __init__(self) -> None:
        self._context: AbstractContextManager[BlockingPortal] = start_blocking_portal(name="playground-portal")
        self._portal = self._context.__enter__()
        self.thread_id = self._portal.call(threading.get_ident)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coroutine` on the loop; cancelling the returned future cancels the task."""
        if threading.get_ident() == self.thread_id:
            coroutine.close()
            raise RuntimeError("Portal.submit called from the portal's own thread (waiting on it would deadlock)")
        return self._portal.start_task_soon(_await, coroutine)

    def close(self) -> None:
        """Cancel what still runs and stop the loop (at exit)."""
        self._context.__exit__(None, None, None)


async def _await(coroutine: Coroutine[Any, Any, T]) -> T:
    return await coroutine


_portals: PerProcess[Portal] = PerProcess(Portal, close=Portal.close)


def portal() -> Portal:
    """This process's portal (a forked Celery child starts its own: threads do not survive a fork)."""
    return _portals.get()
