"""How many threads a request's own runs take (concurrency.py): two only when the host has an idle
core besides this process, and every part of the request that runs side by side gets them."""
from __future__ import annotations

import numpy as np
import pytest

from playground.engine.search import concurrency
from playground.engine.search.concurrency import HostLoad, parse_query_threads, request_threads


class Clock:
    def __init__(self) -> None:
        self.wall = 1000.0
        self.cpu = 5.0


def host(load: float, cores: int = 2, clock: Clock | None = None) -> HostLoad:
    clock = clock or Clock()
    return HostLoad(cores=cores, load=lambda: load, clock=lambda: clock.wall, cpu=lambda: clock.cpu)


def test_auto_takes_a_second_thread_only_when_the_host_leaves_a_core_idle():
    assert request_threads("auto", host(load=0.3)) == 2
    assert request_threads("auto", host(load=0.9)) == 1  # less than 1.5 cores idle
    assert request_threads("auto", host(load=6.0)) == 1  # a busy host: the second thread would only wait
    assert request_threads("auto", host(load=0.0, cores=1)) == 1
    assert request_threads("auto", host(load=2.0, cores=8)) == 2


def test_this_process_own_work_is_not_read_as_a_busy_host():
    """The load average counts this process too: a process busy searching on a quiet 2-core host
    (load 1.2, of which 1.0 is its own) still has a core to spare."""
    clock = Clock()
    quiet_but_busy_here = host(load=1.2, clock=clock)
    assert request_threads("auto", quiet_but_busy_here) == 1  # no history yet: 0.8 cores look idle
    clock.wall += 10.0
    clock.cpu += 10.0  # this process used one core all along
    assert quiet_but_busy_here.idle_cores() == pytest.approx(1.8)
    assert request_threads("auto", quiet_but_busy_here) == 2


def test_the_host_is_read_at_most_once_a_second():
    clock, reads = Clock(), []

    def load() -> float:
        reads.append(clock.wall)
        return 0.2

    watched = HostLoad(cores=2, load=load, clock=lambda: clock.wall, cpu=lambda: clock.cpu)
    for _ in range(5):
        watched.idle_cores()
    clock.wall += 1.0
    watched.idle_cores()
    assert reads == [1000.0, 1001.0]


def test_a_forked_worker_starts_its_own_history(monkeypatch):
    """A prefork worker inherits its parent's samples, but its CPU clock starts from zero: the
    parent's history would read as negative use of its own."""
    import os

    clock = Clock()
    watched = host(load=1.2, clock=clock)
    watched.idle_cores()
    clock.wall += 10.0
    clock.cpu = 0.5  # the child's CPU clock
    monkeypatch.setattr(os, "getpid", lambda: -7)
    assert watched.idle_cores() == pytest.approx(0.8)  # a fresh history: nothing known of its own use yet
    clock.wall += 10.0
    clock.cpu += 10.0
    assert watched.idle_cores() == pytest.approx(1.8)


def test_fixed_settings_are_kept_and_bad_ones_refused(monkeypatch):
    busy = host(load=9.0)
    assert request_threads(1, busy) == 1 and request_threads("3", busy) == 3
    assert parse_query_threads(None) == parse_query_threads("") == parse_query_threads(" Auto ") == "auto"
    for bad in ("many", "0", -2, 0):
        with pytest.raises(ValueError, match="TOOLSEARCH_QUERY_THREADS"):
            parse_query_threads(bad)
    monkeypatch.setenv(concurrency.QUERY_THREADS_ENV, "2")
    assert request_threads(None, busy) == 2
    monkeypatch.delenv(concurrency.QUERY_THREADS_ENV)
    assert concurrency.configured_query_threads() == "auto"


class RecordingEncoder:
    """Records how many runs at once each `encode` call was allowed."""

    dim = 4
    model_id = "recording"

    def __init__(self, query_threads) -> None:
        self.query_threads = query_threads
        self.runs: list[int] = []

    def encode(self, texts, *, batch_size: int = 32, concurrent_runs: int = 1) -> np.ndarray:
        self.runs.append(concurrent_runs)
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


@pytest.mark.parametrize(("load", "runs"), [(0.2, 2), (7.0, 1)])
def test_a_requests_texts_take_two_runs_at_once_only_on_an_idle_host(monkeypatch, load, runs):
    from playground.engine.search.semantic import QueryEmbedder

    monkeypatch.setattr(concurrency, "_host", host(load=load))
    encoder = RecordingEncoder("auto")
    QueryEmbedder(encoder).prefetch(["first text", "second text", "third text"])
    assert encoder.runs == [runs]


def test_the_int8_scan_of_a_request_gets_the_requests_threads(small_catalog, monkeypatch):
    """The scan's parts and its rows' rescoring run side by side with the same rule as the
    request's encoding."""
    from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
    from playground.engine.search.hybrid import HybridBackend
    from playground.engine.search.vector_scan import VectorScan
    from tests.search.fake_encoder import FakeEncoder

    encoder = FakeEncoder()
    backend = HybridBackend(scan_int8_tools=1, scan_rescore=4, semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=MemoryVectorStore())})
    index = backend.index_for(small_catalog)
    assert backend.vector_scan(index).wait(60) and index.semantic.scan.quantized
    seen: list[int] = []
    real = VectorScan.rows

    def recording(self, queries, threads=1):
        seen.append(threads)
        return real(self, queries, threads)

    monkeypatch.setattr(VectorScan, "rows", recording)
    plain = backend.search("weather forecast. Then send an e-mail to Bob", small_catalog).matches
    encoder.query_threads = 2
    assert backend.search("weather forecast. Then send an e-mail to Bob", small_catalog).matches == plain
    encoder.query_threads = "auto"
    monkeypatch.setattr(concurrency, "_host", host(load=8.0))
    backend.search("read a file", small_catalog)
    assert seen == [1, 2, 1]


def test_run_all_keeps_the_order_of_its_items():
    assert concurrency.run_all(lambda x: x * x, list(range(20)), 2) == [x * x for x in range(20)]
    assert concurrency.run_all(lambda x: x + 1, [1, 2], 1) == [2, 3]
