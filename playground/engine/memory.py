"""Handing freed memory back to the operating system.

Building a large structure in Python (an ONNX session's weights, a 100,000-tool catalog decoded from
database rows) allocates far more than it keeps; glibc holds on to the freed blocks, so the process's
resident size stays at its peak. `malloc_trim` returns them. Other C libraries: nothing to do.
"""
from __future__ import annotations

import ctypes
import gc


def return_freed_memory(*, collect: bool = True) -> None:
    """`collect`: run the cycle collector first (objects in reference cycles are freed only then)."""
    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
