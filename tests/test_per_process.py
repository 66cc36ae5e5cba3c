"""PerProcess: one object per process, a forked child makes its own and never closes its parent's."""
from __future__ import annotations

import os

from playground.per_process import PerProcess


class Thing:
    def __init__(self) -> None:
        self.pid = os.getpid()


def test_one_object_per_process_made_on_first_use():
    made = []
    things = PerProcess(lambda: made.append(1) or Thing())
    assert things.made() is None and not made
    first = things.get()
    assert things.get() is first and things.made() is first and made == [1]


def test_a_forked_child_makes_its_own_and_does_not_close_the_parents():
    closed = []
    things = PerProcess(Thing, close=closed.append)
    parent = things.get()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            forgot = things.made() is None
            child = things.get()
            things._close(closed.append)  # what atexit runs in the child
            code = 0 if forgot and child is not parent and child.pid == os.getpid() and closed == [child] else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == bytes([0])
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert things.get() is parent and closed == []
    things._close(closed.append)
    assert closed == [parent]


def test_the_mcp_client_uses_the_main_portal_and_broadcasts_their_own():
    """The MCP client's calls (and conversation runs) use the process's main portal; the realtime
    sender's sends its broadcast portal, so a frame never waits behind runs' turn building."""
    import threading

    from playground import per_process
    from playground.mcp_servers.connection import background_loop

    async def where() -> int:
        return threading.get_ident()

    portal, broadcasts = per_process.portal(), per_process.broadcast_portal()
    assert per_process.portal() is portal and per_process.broadcast_portal() is broadcasts
    assert portal.thread_id != broadcasts.thread_id
    assert background_loop().run(where(), timeout=10) == portal.thread_id
    assert portal.submit(where()).result(10) == portal.thread_id
    # From a run on the main loop, a wait on the broadcast portal runs there while the run yields.
    assert portal.start_run(lambda: broadcasts.wait(where(), 10)).result(10) == broadcasts.thread_id
    names = [t.name for t in threading.enumerate()]
    assert names.count("playground-portal") <= 1 and names.count("playground-broadcast") <= 1


def test_ready_runs_take_the_loop_oldest_first():
    """Runs woken together execute their code in the order they started, not the order they woke."""
    import asyncio

    from playground.per_process import _Turns

    order: list[float] = []

    async def run(turns: _Turns, started: float) -> None:
        await turns.take(started)
        try:
            order.append(started)
        finally:
            turns.give_back()

    async def main() -> None:
        turns = _Turns()
        await asyncio.gather(*(run(turns, started) for started in (3.0, 1.0, 4.0, 2.0)))
        # A run cancelled while it waits for its turn passes nothing on and blocks nobody.
        blocked = asyncio.ensure_future(run(turns, 0.5))
        blocked.cancel()
        await asyncio.gather(run(turns, 5.0), blocked, return_exceptions=True)
        assert not turns.busy and not turns.waiting

    asyncio.run(main())
    assert order == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_portal_refuses_to_wait_on_itself():
    import pytest

    from playground import per_process

    async def nested() -> None:
        per_process.portal().submit(asyncio_sleep())

    async def asyncio_sleep() -> None:
        return None

    with pytest.raises(RuntimeError, match="own thread"):
        per_process.portal().submit(nested()).result(10)


def test_a_forked_child_of_a_process_with_a_portal_gets_its_own_and_does_not_hang():
    """The parent's portal is abandoned in the child, never finalised: its close would wait forever on
    a loop thread that does not exist after the fork (as in a Celery prefork child)."""
    import gc
    import time

    from playground import per_process

    async def answer() -> int:
        return os.getpid()

    assert per_process.portal().submit(answer()).result(10) == os.getpid()
    parent_thread = per_process.portal().thread_id  # no reference to the parent's portal held here
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            gc.collect()  # would run the parent's portal's finaliser if it were dropped
            code = 0 if per_process.portal().submit(answer()).result(10) == os.getpid() else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    assert per_process.portal().thread_id == parent_thread
