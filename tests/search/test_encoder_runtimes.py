"""The encoder's runtimes: ONNX Runtime float against the sentence-transformers reference vectors, int8 against float."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from playground.engine.search.encoder import EncoderUnavailable
from playground.engine.search.onnx_encoder import pack_rows
from tests.conftest import IN_CI

REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"
# Lengths that differ a lot, so one call runs several padded groups (and a padded row or two)
TEXTS = [
    "weather",
    "Get the weather forecast for Paris.",
    "Get the weather forecast for Paris, and then book a flight to Rome for next Tuesday morning.",
    "List open pull requests",
    "Create a new issue in a GitHub repository with a title, a body and the labels bug and urgent.",
    "Send an e-mail message to one or more recipients.",
    "时间",
]


@pytest.fixture(scope="module")
def runtimes():
    from playground.engine.search.encoder import shared_encoder
    from playground.engine.search.onnx_encoder import onnx_available

    missing = onnx_available()
    if missing:
        if IN_CI:
            pytest.fail(f"onnxruntime is part of the semantic extra, required under CI=true: {missing}")
        pytest.skip(missing)
    try:
        return {name: shared_encoder(name) for name in ("onnx", "onnx-int8")}
    except EncoderUnavailable as exc:
        if IN_CI:
            pytest.fail(f"the semantic extra is required under CI=true: {exc}")
        pytest.skip(f"semantic extra not installed: {exc}")


def test_onnx_matches_sentence_transformers(runtimes):
    reference = json.loads(REFERENCE.read_text())
    ours = runtimes["onnx"].encode(reference["texts"])
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    assert ((ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)).min() >= 0.999


def test_texts_sharing_rows_each_get_their_own_vector(runtimes, monkeypatch):
    """Texts are packed into shared rows: no neighbour may leak into a text's attention,
    positions or pooling."""
    from playground.engine.search import onnx_encoder

    encoder = runtimes["onnx"]
    alone = np.stack([encoder.encode([t])[0] for t in TEXTS])
    assert np.abs(encoder.encode(TEXTS) - alone).max() < 1e-5  # one row
    monkeypatch.setattr(onnx_encoder, "ROW_TOKENS", 30)
    lengths = [len(encoder.tokenizer.encode(t).ids) for t in TEXTS]
    rows = onnx_encoder.pack_rows(lengths)
    assert len(rows) > 2 and any(len(row) > 1 for row in rows)  # several runs, rows of several texts
    assert np.abs(encoder.encode(TEXTS) - alone).max() < 1e-5


def test_pooled_vectors_read_pieces_in_the_context_of_the_whole_text(runtimes):
    encoder = runtimes["onnx"]
    text = "Get the weather forecast for Paris, and then book a flight to Rome."
    spans = [(0, text.index(",")), (text.index("book"), len(text))]
    pooled = encoder.encode_pooled(text, spans)
    assert np.abs(pooled[0] - encoder.encode([text])[0]).max() < 1e-5  # row 0: the text's own vector
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)
    alone = encoder.encode([text[a:b] for a, b in spans])
    cosines = (pooled[1:] * alone).sum(axis=1)
    assert (cosines > 0.5).all() and (cosines < 0.9999).all()  # the same piece, read in context


def test_int8_is_close_but_cached_apart(runtimes):
    reference = json.loads(REFERENCE.read_text())
    texts = reference["texts"] + TEXTS
    cosines = (runtimes["onnx-int8"].encode(texts) * runtimes["onnx"].encode(texts)).sum(axis=1)
    assert cosines.min() > 0.97 and np.median(cosines) > 0.985
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    against_torch = (runtimes["onnx-int8"].encode(reference["texts"]) * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert against_torch.min() > 0.97
    assert cosines.max() < 0.99999  # quantized for real, not the float model
    assert runtimes["onnx-int8"].model_id == runtimes["onnx"].model_id + "+int8.2"


def test_an_int8_vector_depends_on_its_text_alone(runtimes):
    """int8 quantizes a run's activations with one scale, so texts sharing a run moved each
    other's vectors (cosine ~0.993 to the text alone): the cached vector of a tool depended on
    the tools encoded with it. Each int8 text now runs alone: the same vector in any company."""
    encoder = runtimes["onnx-int8"]
    alone = np.stack([encoder.encode([t])[0] for t in TEXTS])
    assert np.array_equal(encoder.encode(TEXTS), alone)
    assert np.array_equal(encoder.encode([TEXTS[0], "x " * 60])[0], alone[0])
    assert np.array_equal(encoder.encode_pooled(TEXTS[0], [(0, 5)])[0], alone[0])  # the pooled path's row 0 too


def test_int8_ranks_the_small_catalog_as_the_float_model_does(runtimes, small_catalog, embeddings_dir):
    from playground.engine.search.semantic import SemanticBackend

    float_backend, int8_backend = SemanticBackend(runtime="onnx"), SemanticBackend(runtime="onnx-int8")
    assert int8_backend.encoder is runtimes["onnx-int8"]
    for query in ("is it going to rain tomorrow in my city", "message my colleague by mail", "open a merge request"):
        assert int8_backend.search(query, small_catalog).matches[:2] == float_backend.search(query, small_catalog).matches[:2]
    explanation = int8_backend.search("weather forecast for tomorrow", small_catalog).scored[0].breakdown[0].detail
    assert "+int8.2" in explanation


def test_one_shared_encoder_per_runtime_however_asked(runtimes, monkeypatch):
    from playground.engine.search.encoder import RUNTIME_ENV, shared_encoder

    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    assert shared_encoder() is shared_encoder("auto") is shared_encoder("ONNX-int8 ") is runtimes["onnx-int8"]
    monkeypatch.setenv(RUNTIME_ENV, "onnx")
    assert shared_encoder() is runtimes["onnx"]


def test_an_unknown_runtime_is_a_clear_error(monkeypatch):
    from playground.engine.search.encoder import RUNTIME_ENV, resolve_runtime
    from playground.engine.search.semantic import SemanticBackend

    with pytest.raises(EncoderUnavailable, match="'tensorflow' is not a runtime: choose one of auto, onnx, onnx-int8"):
        resolve_runtime("tensorflow")
    monkeypatch.setenv(RUNTIME_ENV, "cuda")
    with pytest.raises(EncoderUnavailable, match=f"{RUNTIME_ENV}='cuda'"):
        resolve_runtime(None)
    with pytest.raises(EncoderUnavailable, match="'gpu' is not a runtime"):
        SemanticBackend(runtime="gpu")


def test_without_onnxruntime_the_encoder_is_unavailable_and_says_why(monkeypatch):
    from playground.engine.search import onnx_encoder
    from playground.engine.search.encoder import resolve_runtime

    monkeypatch.setattr(onnx_encoder, "onnx_available", lambda: "onnxruntime/onnx not installed (test)")
    for runtime in ("auto", "onnx", "onnx-int8"):
        with pytest.raises(EncoderUnavailable, match="needs the semantic extra's onnxruntime/onnx not installed"):
            resolve_runtime(runtime)


def test_rows_hold_every_text_once_within_their_size(monkeypatch):
    from playground.engine.search import onnx_encoder

    monkeypatch.setattr(onnx_encoder, "ROW_TOKENS", 256)
    lengths = [30, 8, 9, 31, 60, 10, 12, 7, 200, 29, 11, 61, 1, 300]
    rows = pack_rows(lengths)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 256 for row in rows if len(row) > 1)
    assert [13] in rows  # longer than a row: a row of its own
    assert len(rows) == 3  # first fit by decreasing length: 300 | 200 31 12 11 1 | 61 60 30 29 10 9 8 7
    assert len(pack_rows([20, 30, 25, 12, 10])) == 1  # a request with its sentences and clauses: one run


def test_the_int8_model_is_saved_once_then_read_instead_of_built(runtimes, tmp_path, monkeypatch, caplog):
    from playground.engine.search.encoder import MiniLMEncoder

    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(tmp_path))
    first = MiniLMEncoder(runtime="onnx-int8")
    saved = list((tmp_path / "models").glob("minilm-int8-*.onnx"))
    assert len(saved) == 1 and first._onnx.loaded_from is None and saved[0].stat().st_size > 10_000_000
    assert not list((tmp_path / "models").glob("*.part"))
    with monkeypatch.context() as patched:
        patched.setattr(MiniLMEncoder, "_load_weights", lambda self: pytest.fail("weights loaded although the int8 model was saved"))
        second = MiniLMEncoder(runtime="onnx-int8")
    assert second._onnx.loaded_from == saved[0]
    assert np.array_equal(second.encode(TEXTS), first.encode(TEXTS))
    # a new process that reads the saved model does not even import `onnx` (~0.7 s of start-up)
    probe = ("import sys; from playground.engine.search.encoder import MiniLMEncoder; "
             "e = MiniLMEncoder(runtime='onnx-int8'); print(e._onnx.loaded_from is not None, 'onnx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TOOLSEARCH_CACHE_DIR": str(tmp_path)}, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]
    assert np.array_equal(first.encode(TEXTS), runtimes["onnx-int8"].encode(TEXTS))  # built or read: the same model
    saved[0].write_bytes(b"half a model")  # damaged: built again and replaced, with a warning
    # (the logger's own level: a Celery test worker earlier in the session sets the root's to ERROR)
    with caplog.at_level(logging.WARNING, logger="playground.engine.search.onnx_encoder"):
        third = MiniLMEncoder(runtime="onnx-int8")
    assert third._onnx.loaded_from is None and "unreadable" in caplog.text
    assert saved[0].stat().st_size > 10_000_000 and np.array_equal(third.encode(TEXTS), first.encode(TEXTS))


def test_the_saved_model_is_named_by_the_weights_it_came_from(tmp_path, monkeypatch):
    from playground.engine.search.onnx_encoder import onnx_available, quantized_model_path

    if onnx_available():
        pytest.skip(onnx_available())
    folders = []
    for name, weights in (("a", b"one"), ("b", b"two"), ("c", b"one")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(weights)
        (folder / "config.json").write_text("{}")
        folders.append(folder)
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    a, b, c = (quantized_model_path(folder) for folder in folders)
    assert a != b and a == c and a.parent == tmp_path / "cache" / "models"
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", "off")
    assert quantized_model_path(folders[0]) is None


def test_quantizing_leaves_the_logging_setup_as_it_was(runtimes, monkeypatch, caplog):
    """The quantizer logs ~100 lines on the root logger; they are dropped while it runs, and the
    root logger's level and filters are what they were (a level change was not thread-safe)."""
    from playground.engine.search.encoder import MiniLMEncoder

    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", "off")  # built, not read
    root = logging.getLogger()
    level, filters = root.level, list(root.filters)
    with caplog.at_level(logging.INFO):
        MiniLMEncoder(runtime="onnx-int8")
    assert not [r for r in caplog.records if r.name == "root"], [r.getMessage() for r in caplog.records][:3]
    assert any(r.name == "playground.engine.search.encoder" for r in caplog.records)  # named loggers still heard
    assert root.level == level and root.filters == filters


@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8"])
def test_concurrent_runs_give_the_same_vectors(runtimes, runtime):
    """A request's own texts may go through several ONNX runs at once (TOOLSEARCH_QUERY_THREADS):
    each run is the run it would be alone, so the vectors are the same bits."""
    encoder = runtimes[runtime]
    assert np.array_equal(encoder.encode(TEXTS, concurrent_runs=3), encoder.encode(TEXTS))


def test_a_requests_texts_are_encoded_concurrently(runtimes, monkeypatch):
    """The query embedder hands a request's texts (the request, its sentences and clauses) to the
    encoder with its query threads; catalog builds (`encode` without them) keep one run at a time."""
    from playground.engine.search import onnx_encoder
    from playground.engine.search.semantic import QueryEmbedder

    encoder = runtimes["onnx-int8"]
    monkeypatch.setattr(encoder, "query_threads", 2)
    seen: list[int] = []
    real = onnx_encoder.OnnxNetwork.token_states

    def recording(self, batch, concurrent_runs=1):
        seen.append(concurrent_runs)
        return real(self, batch, concurrent_runs)

    monkeypatch.setattr(onnx_encoder.OnnxNetwork, "token_states", recording)
    QueryEmbedder(encoder).prefetch(TEXTS[:3])
    assert seen == [2]
    encoder.encode(TEXTS[:3])
    assert seen == [2, 1]


def test_query_threads_come_from_the_environment(monkeypatch):
    from playground.engine.search import encoder as encoder_module

    monkeypatch.setenv(encoder_module.QUERY_THREADS_ENV, "2")
    try:
        assert encoder_module.MiniLMEncoder().query_threads == 2
    except EncoderUnavailable as exc:
        if IN_CI:
            pytest.fail(f"the semantic extra is required under CI=true: {exc}")
        pytest.skip(str(exc))
    monkeypatch.delenv(encoder_module.QUERY_THREADS_ENV)
    assert encoder_module.MiniLMEncoder().query_threads == encoder_module.DEFAULT_QUERY_THREADS
