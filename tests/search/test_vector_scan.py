"""The int8 tool scan of large catalogs (vector_scan.py): exact at the top, close below, float32 until built."""
from __future__ import annotations

import numpy as np

from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.vector_scan import VectorScan
from tests.search.fake_encoder import FakeEncoder


def unit_rows(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_each_rows_best_tools_are_exact_and_the_rest_close():
    matrix, queries = unit_rows(3000), unit_rows(3, seed=1)
    exact = queries @ matrix.T
    scan = VectorScan(matrix, min_tools=1000, rescore=50)
    assert np.array_equal(scan.rows(queries), exact)  # before the int8 scanner is built: float32
    scan.prepare()
    assert scan.wait(60) and scan.quantized
    rows = scan.rows(queries)
    assert np.abs(rows - exact).max() < 0.01 and not np.array_equal(rows, exact)
    for row, exact_row in zip(rows, exact):
        best = np.argsort(-exact_row)[:40]  # well inside the 50 rescored (the int8 order may swap the cut)
        assert np.allclose(row[best], exact_row[best], atol=1e-5)  # the tools that can reach the top: exact
        assert list(np.argsort(-row)[:10]) == list(best[:10])


def test_small_matrices_are_never_quantized():
    scan = VectorScan(unit_rows(100), min_tools=1000)
    scan.prepare()
    assert scan.wait(0) and not scan.quantized


def test_hybrid_ranks_a_large_catalog_with_the_int8_scan_as_with_float32(small_catalog):
    """`scan_int8_tools` lowered so that the small catalog takes the large-catalog path."""
    def backend(**options) -> HybridBackend:
        encoder = FakeEncoder()
        return HybridBackend(semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=MemoryVectorStore())}, **options)

    plain, scanned = backend(), backend(scan_int8_tools=1, scan_rescore=4)
    index = scanned.index_for(small_catalog)
    assert scanned.vector_scan(index).wait(60) and index.semantic.scan.quantized
    for query in ("create an issue in github", "weather forecast. Then send an e-mail to Bob", "read a file"):
        assert scanned.search(query, small_catalog).matches == plain.search(query, small_catalog).matches, query


def test_an_index_keeps_one_scan_per_setting():
    from types import SimpleNamespace

    from playground.engine.search.vector_scan import scan_for

    index = SimpleNamespace(vectors=unit_rows(10), scan=None)
    first = scan_for(index, min_tools=5, rescore=3)
    assert scan_for(index, min_tools=5, rescore=3) is first
    assert scan_for(index, min_tools=5, rescore=4) is not first
