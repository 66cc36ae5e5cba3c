"""How many threads one request's own work may take: its texts' encoder runs and its int8 scan.

A long natural-language request is encoded as up to a dozen texts (the request, its sentences and
clauses: one int8 ONNX run each), then scanned against the catalog; each of those runs is the same
run whether it goes alone or beside another (same vectors, same cosines, tested), so on a host with
an idle core they can go two at a time. On a busy host the second thread only waits for a core, and
the request gets slower, not faster (docs/benchmarks.md, "Where a natural request's time goes at
100,000 tools": p50 36 → 50 ms under a load average of 12 on 2 cores).

`TOOLSEARCH_QUERY_THREADS`: `auto` (the default), or a number (`1`: always one at a time). `auto`
takes a second thread only when the host leaves more than one core idle besides this process:
usable cores − (the 1-minute load average − this process's own recent CPU use) ≥ IDLE_CORES_FOR_TWO.
The process's own use is taken out because the load average counts it too: a process that is busy
searching would otherwise read its own work as a busy host and never use its idle core. Catalog
builds never come here: they keep one core.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

QUERY_THREADS_ENV = "TOOLSEARCH_QUERY_THREADS"
AUTO = "auto"
# One core for the request's own thread and most of another for the second: below that, a second
# thread mostly queues behind other processes.
IDLE_CORES_FOR_TWO = 1.5
AUTO_MAX_THREADS = 2
# This process's CPU use is averaged over about the load average's own window (1 minute).
OWN_USE_WINDOW_S = 60.0
OWN_USE_SAMPLE_S = 1.0

T = TypeVar("T")
R = TypeVar("R")


def parse_query_threads(value: str | int | None) -> str | int:
    """`auto` or a thread count ≥ 1, from a setting (None or "" = the default, `auto`); a bad value
    is a clear error, not a silent default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return AUTO
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{QUERY_THREADS_ENV}={value!r}: say 'auto' or a number of threads (1 = one at a time)") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{QUERY_THREADS_ENV}={value!r}: say 'auto' or a number of threads (1 = one at a time)")
    return value


def configured_query_threads() -> str | int:
    return parse_query_threads(os.environ.get(QUERY_THREADS_ENV))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class HostLoad:
    """Idle cores of the host as other processes leave them: usable cores − (1-minute load average
    − this process's CPU use over about the same minute). Read at most once per OWN_USE_SAMPLE_S
    (a process's CPU clock sums all its threads). `load` and `clock` are injectable for tests."""

    def __init__(self, cores: int | None = None, load: Callable[[], float] | None = None,
                 clock: Callable[[], float] | None = None, cpu: Callable[[], float] | None = None) -> None:
        self.cores = cores if cores is not None else usable_cores()
        self._load = load or (lambda: os.getloadavg()[0])
        self._clock = clock or time.monotonic
        self._cpu = cpu or time.process_time
        self._samples: deque[tuple[float, float]] = deque()  # (wall, this process's CPU seconds)
        self._idle: float | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def idle_cores(self) -> float:
        wall = self._clock()
        with self._lock:
            if os.getpid() != self._pid:  # a forked worker: its CPU clock starts again from zero
                self._pid, self._idle = os.getpid(), None
                self._samples.clear()
            if self._idle is not None and wall - self._samples[-1][0] < OWN_USE_SAMPLE_S:
                return self._idle
            self._samples.append((wall, self._cpu()))
            while len(self._samples) > 2 and wall - self._samples[1][0] >= OWN_USE_WINDOW_S:
                self._samples.popleft()
            (first_wall, first_cpu), (_, cpu) = self._samples[0], self._samples[-1]
            own_use = (cpu - first_cpu) / (wall - first_wall) if wall > first_wall else 0.0
            try:
                others = max(0.0, self._load() - own_use)
            except OSError:  # no load average: assume nothing to spare
                others = float(self.cores)
            self._idle = self.cores - others
            return self._idle


_host = HostLoad()


def request_threads(setting: str | int | None = None, host: HostLoad | None = None) -> int:
    """Threads for one request's own runs now: a fixed setting as it is; `auto` 2 when the host
    has IDLE_CORES_FOR_TWO idle cores besides this process, else 1. None: TOOLSEARCH_QUERY_THREADS."""
    setting = configured_query_threads() if setting is None else parse_query_threads(setting)
    if setting != AUTO:
        return int(setting)
    host = host or _host
    if host.cores < 2:
        return 1
    return AUTO_MAX_THREADS if host.idle_cores() >= IDLE_CORES_FOR_TWO else 1


def run_all(work: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """`[work(item) for item in items]`, `threads` at a time on this process's pool (ONNX Runtime
    and NumPy's large loops release the GIL). Results in `items` order."""
    if threads <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    return list(run_pool(threads).map(work, items))


_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def run_pool(workers: int) -> ThreadPoolExecutor:
    """One small thread pool per size and process, for a request's concurrent runs. Keyed by the
    process id too: a forked child (a prefork worker) must not use its parent's pool, whose threads
    it does not have — its tasks would wait forever."""
    key = (os.getpid(), workers)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="toolsearch-request")
        return pool
