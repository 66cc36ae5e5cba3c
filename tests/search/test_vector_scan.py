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


def test_the_int8_matrix_reaches_onnx_runtime_outside_the_model(monkeypatch):
    """Built in a serving process's background thread: the 38 MB of a 100,000-tool matrix copied
    into the model's protobuf and serialized held the GIL for seconds (a search arriving meanwhile
    waited). The model handed to ONNX Runtime now holds no weights; they come as OrtValues over the
    NumPy arrays, quantized exactly as before (per tool: round(v / (max|v| / 127)))."""
    import onnxruntime

    from playground.engine.search.vector_scan import QuantizedScan

    models: list[bytes] = []
    real = onnxruntime.InferenceSession

    def recording(model, *args, **kwargs):
        models.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording)
    matrix, queries = unit_rows(20_000, seed=3), unit_rows(2, seed=4)
    matrix[7] = 0.0  # a zero row: scale 1, no division by zero
    scan = QuantizedScan(matrix)
    # one session per part of the tools; the weights are 20,000 × 384 bytes, not in there
    assert len(models) == QuantizedScan.PARTS and all(len(model) < 2_000 for model in models)
    scale = np.abs(matrix).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    reference = np.round(matrix / scale[:, None]).astype(np.int8)
    quantized = np.concatenate([part for part, _ in scan._initializers], axis=1)
    scales = np.concatenate([part for _, part in scan._initializers])
    assert np.array_equal(quantized, reference.T) and np.array_equal(scales, scale.astype(np.float32))
    assert np.abs(scan.cosines(queries) - queries @ matrix.T).max() < 0.01


def test_the_parts_of_the_scan_give_the_cosines_of_one_scan_alone_or_side_by_side():
    """The int8 matrix is split into parts, each its own ONNX Runtime session, so a request can scan
    them on two threads: every tool gets the cosine one session over the whole matrix gives it (the
    query rows are quantized per run, alike in every part), on one thread or two, and so do the
    rows rescored exactly."""
    from playground.engine.search.vector_scan import QuantizedScan

    matrix, queries = unit_rows(9_001, seed=5), unit_rows(4, seed=6)
    whole = QuantizedScan.__new__(QuantizedScan)
    whole.sessions = [QuantizedScan._session(*whole._quantize(matrix))]
    split = QuantizedScan(matrix)
    assert len(split.sessions) == 2
    alone = whole.cosines(queries)
    assert np.array_equal(split.cosines(queries), alone)
    assert np.array_equal(split.cosines(queries, threads=2), alone)
    scan = VectorScan(matrix, min_tools=1000, rescore=300)
    scan.prepare()
    assert scan.wait(60) and scan.quantized
    assert np.array_equal(scan.rows(queries, threads=2), scan.rows(queries))
