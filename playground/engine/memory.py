"""Handing freed memory back to the operating system.

Building a large structure in Python (an ONNX session's weights, a 100,000-tool catalog decoded from
database rows) allocates far more than it keeps; glibc holds on to the freed blocks, so the process's
resident size stays at its peak. `malloc_trim` returns them. Other C libraries: nothing to do.
"""
from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from contextlib import contextmanager


def return_freed_memory(*, collect: bool = True) -> None:
    """`collect`: run the cycle collector first (objects in reference cycles are freed only then)."""
    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while a large structure without cycles is built (a catalog of 100,000
    tools read from rows, a stored index read back): each full pass walks every object of the
    process, and the allocations of such a build set off several of them (0.4–0.8 s of CPU on a
    fresh process's first search at 100,000 tools). Reference counting still frees everything; the
    collector is back as it was afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
