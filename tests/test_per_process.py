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
