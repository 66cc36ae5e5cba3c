"""One object per process, made on first use; and the process's one event loop for sync code (`portal()`).

Runs on the loop (`Portal.start_run`): a worker hands each conversation run to its process's loop,
where the run's plain, synchronous code (the agent loop, its ORM calls) executes in a greenlet of the
loop's thread. Wherever that code waits (`Portal.wait`: a model API call, an MCP tool call, a paced
reply, a broadcast), the greenlet switches back to the loop, which awaits the coroutine as any task
and switches back with its result. So a waiting run holds no thread and no process, and one process
carries many runs; the same code called from an ordinary thread (a test, a view) blocks on the
loop's future as before. This is SQLAlchemy's asyncio bridge (`greenlet_spawn` / `await_only`) in
a few lines: asyncio does all the scheduling. The runs share the loop thread's database connection;
none waits inside a transaction (every wait is a model, tool or broadcast call, none under
`transaction.atomic`), so their statements never interleave inside one.

The event loop on a background thread, the channel layer's sender and the MCP session pool are each
kept once per process. A forked child (Celery's prefork pool) must not use its parent's: the
parent's threads do not exist in the child, and its sockets belong to the parent. So the child
forgets the parent's object without closing it and makes its own on first use.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import heapq
import itertools
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Generic, TypeVar

import greenlet
from anyio.from_thread import BlockingPortal, start_blocking_portal

from playground.engine.execution import CallCancelled, CancelSignal

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
    """An event loop for sync code: an anyio blocking portal (an asyncio loop on a daemon thread).
    The process's main one (`portal()`) carries the conversation runs and the MCP client's sessions
    (mcp_servers/connection.py); the broadcast one (`broadcast_portal()`) the realtime sender's
    channel layer (realtime.py). Async clients bound to a loop (channels_redis, httpx, the MCP SDK)
    keep their connections across calls because the loop outlives each call."""

    def __init__(self, name: str = "playground-portal") -> None:
        self._context: AbstractContextManager[BlockingPortal] = start_blocking_portal(name=name)
        self._portal = self._context.__enter__()
        self.thread_id = self._portal.call(threading.get_ident)
        self.loop = self._portal.call(asyncio.get_running_loop)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coroutine` on the loop; cancelling the returned future cancels the task."""
        if threading.get_ident() == self.thread_id:
            coroutine.close()
            raise RuntimeError("Portal.submit called from the portal's own thread (waiting on it would deadlock)")
        return self._portal.start_task_soon(_await, coroutine)

    def wait(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None, *,
             cancel: CancelSignal | None = None) -> T:
        """Run `coroutine` on the loop and return its result, from sync code. In a run on the loop
        (`start_run`) the run's greenlet yields to the loop meanwhile; elsewhere the thread blocks.
        Past `timeout` it raises TimeoutError; once `cancel` is set the coroutine is cancelled and
        CallCancelled raised at once."""
        if in_loop_run():
            if threading.get_ident() != self.thread_id:  # another portal's loop (the broadcasts'): awaited from here
                coroutine = _on_other_loop(self, coroutine)
            return _await_in_run(_guarded(coroutine, timeout, cancel))
        future = self.submit(coroutine)
        with cancel.while_running(future.cancel) if cancel is not None else nullcontext():
            try:
                return future.result(timeout)
            except concurrent.futures.CancelledError:
                if cancel is not None and cancel.is_set():
                    raise CallCancelled() from None
                raise
            except TimeoutError:
                future.cancel()
                raise

    def start_run(self, function: Callable[..., T], *args: Any,
                  on_first_wait: Callable[[], None] | None = None) -> concurrent.futures.Future[T]:
        """Run the plain function `function(*args)` on the loop, in a greenlet of its own: its waits
        (`wait`) yield to the loop. The returned future holds its result. Returns at once, however
        busy the loop is (anyio's `start_task_soon` would wait for the loop to take the task).
        `on_first_wait` is called (on the loop's thread) once the run first waits or ends."""
        return asyncio.run_coroutine_threadsafe(_drive(function, args, time.monotonic(), on_first_wait), self.loop)

    def close(self) -> None:
        """Cancel what still runs and stop the loop (at exit)."""
        self._context.__exit__(None, None, None)


async def _await(coroutine: Coroutine[Any, Any, T]) -> T:
    return await coroutine


# -- runs on the loop: plain code in a greenlet, its waits awaited by the loop ------------------------
class _LoopRun(greenlet.greenlet):
    """The greenlet of one run; its parent is the loop's own greenlet, which awaits what it yields."""


def in_loop_run() -> bool:
    """True in the code of a run on the loop (`Portal.start_run`): waits must yield, not block."""
    return isinstance(greenlet.getcurrent(), _LoopRun)


def _await_in_run(awaitable: Awaitable[T]) -> T:
    # Back to the loop's greenlet (`_drive`), which awaits it and switches back with the result.
    return greenlet.getcurrent().parent.switch(awaitable)


class _Turns:
    """Which ready run executes its plain code next on a loop: the one started first.

    Every run's code runs on the loop's one thread, a slice at a time between waits. When the
    process's CPU is the bottleneck, taking ready runs in the order they became ready interleaves
    all of them, so they all end near the end (every run as slow as the last). Taking the oldest
    ready run first serves runs in the order they came, as a queue of workers would, while every
    run's waits (model, tools, broadcasts) still overlap. Only the runs' own slices queue here; the
    coroutines they wait on (HTTP, Redis) run on the loop as soon as it is free.
    """

    def __init__(self) -> None:
        self.waiting: list[tuple[float, int, asyncio.Future]] = []
        self.busy = False
        self.order = itertools.count()

    async def take(self, started: float) -> None:
        loop = asyncio.get_running_loop()
        turn = loop.create_future()
        heapq.heappush(self.waiting, (started, next(self.order), turn))
        if not self.busy:
            self.busy = True
            loop.call_soon(self.give_back)  # next iteration: the runs woken with this one are in the heap too
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give_back()  # granted, then cancelled before it ran: pass the turn on
            raise

    def give_back(self) -> None:
        while self.waiting:
            _, _, turn = heapq.heappop(self.waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self.busy = False


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def _drive(function: Callable[..., T], args: tuple[Any, ...], started: float,
                 on_first_wait: Callable[[], None] | None = None) -> T:
    loop = asyncio.get_running_loop()
    turns = _turns.setdefault(loop, _Turns())
    run = _LoopRun(function)
    value: Any = args
    error: BaseException | None = None
    first = True
    while True:
        await turns.take(started)
        # While the run's plain code executes, this thread shows no running loop: Django's
        # async-safety check and `send_to_group` see sync code, which it is between waits.
        asyncio.events._set_running_loop(None)
        try:
            if first:
                first = False
                yielded = run.switch(*value)
            elif error is not None:
                yielded = run.throw(error)
            else:
                yielded = run.switch(value)
        finally:
            asyncio.events._set_running_loop(loop)
            turns.give_back()
            if on_first_wait is not None:
                on_first_wait, told = None, on_first_wait
                told()
        if run.dead:
            return yielded
        try:
            value, error = await yielded, None
        except BaseException as exc:  # noqa: BLE001 - handed to the run, which raises it where it waited
            value, error = None, exc


async def _on_other_loop(other: Portal, coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine` run on another portal's loop, awaited from this one (cancelling this cancels it there)."""
    return await asyncio.wrap_future(other.submit(coroutine))


async def _guarded(coroutine: Coroutine[Any, Any, T], timeout: float | None, cancel: CancelSignal | None) -> T:
    """`coroutine` as a task of its own, cancelled when `cancel` is set (from any thread)."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(coroutine)

    def stop() -> None:  # called by whoever sets the signal, in any thread
        loop.call_soon_threadsafe(task.cancel)

    with cancel.while_running(stop) if cancel is not None else nullcontext():
        try:
            return await asyncio.wait_for(task, timeout)
        except asyncio.CancelledError:
            if cancel is not None and cancel.is_set() and task.cancelled():
                raise CallCancelled() from None
            raise


_portals: PerProcess[Portal] = PerProcess(Portal, close=Portal.close)


def portal() -> Portal:
    """This process's portal (a forked Celery child starts its own: threads do not survive a fork)."""
    return _portals.get()


_broadcast_portals: PerProcess[Portal] = PerProcess(lambda: Portal("playground-broadcast"), close=Portal.close)


def broadcast_portal() -> Portal:
    """This process's loop for broadcasts alone (realtime.py): a frame goes out while the main loop
    is busy with runs' turns, never behind them."""
    return _broadcast_portals.get()
