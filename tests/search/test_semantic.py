from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from playground.engine.search.embedding_cache import EmbeddingCache, embed_tools
from playground.engine.search.semantic import SemanticBackend
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp

REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"


def test_float_encoder_matches_sentence_transformers(encoder):
    """Reference vectors were computed once with sentence-transformers + torch (see the fixture).
    (ONNX Runtime, float and int8: test_encoder_runtimes.py.)"""
    from playground.engine.search.encoder import shared_encoder

    reference = json.loads(REFERENCE.read_text())
    ours = shared_encoder("onnx").encode(reference["texts"])
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_ranks_by_meaning_not_shared_words(encoder, embeddings_dir, small_catalog):
    backend = SemanticBackend()
    # only "city" is shared with any tool text (get_forecast's schema): ranking is by meaning
    result = backend.search("is it going to rain tomorrow in my city", small_catalog)
    assert result.matches[0] == "mcp__weather__get_forecast"
    top = result.scored[0]
    assert top.breakdown[0].rule == "cosine similarity" and top.breakdown[0].field == "embedding"
    assert top.breakdown[0].points == pytest.approx(top.score, abs=1e-3)
    assert backend.search("message my colleague by mail", small_catalog).matches[0] == "mcp__mail__send_email"


class CountingEncoder:
    def __init__(self, encoder):
        self.encoder = encoder
        self.texts: list[str] = []

    def __call__(self, texts):
        self.texts.extend(texts)
        return self.encoder.encode(texts)


def test_cache_encodes_only_new_or_changed_tools_across_restarts(encoder, tmp_path, small_catalog):
    path = tmp_path / "cache" / "embeddings.sqlite3"
    counting = CountingEncoder(encoder)
    tools = list(small_catalog.deferred)

    first, stats = embed_tools(tools, counting, EmbeddingCache(path, encoder.dim), model_id="m")
    assert stats.encoded == len(tools) and len(counting.texts) == len(tools)

    restarted = EmbeddingCache(path, encoder.dim)  # a new process: empty memory, same file
    again, stats = embed_tools(tools, counting, restarted, model_id="m")
    assert stats.encoded == 0 and stats.reused == len(tools)
    assert len(counting.texts) == len(tools)
    assert np.array_equal(first, again)

    # A sync changes one description and adds one tool: exactly two encodings.
    changed = [mcp("weather", "get_alerts", "Severe weather alerts, now worldwide."), mcp("notes", "add", "Add a note")]
    synced = [t for t in tools if t.name != "mcp__weather__get_alerts"] + changed
    _, stats = embed_tools(synced, counting, restarted, model_id="m")
    assert stats.encoded == 2
    assert len(counting.texts) == len(tools) + 2
    assert "worldwide" in counting.texts[-2] and counting.texts[-1].startswith("add (notes)")

    # Another model id never reuses these vectors.
    _, stats = embed_tools(tools, counting, restarted, model_id="other")
    assert stats.encoded == len(tools)


def test_backend_uses_the_disk_cache(encoder, embeddings_dir, small_catalog):
    first = SemanticBackend().index_for(small_catalog)
    assert first.stats.encoded == len(small_catalog.deferred)
    assert (embeddings_dir / "embeddings.sqlite3").is_file()
    from playground.engine.search import embedding_cache

    embedding_cache._shared_caches.clear()  # as after a restart
    second = SemanticBackend().build_index(small_catalog)
    assert second.stats.encoded == 0 and second.stats.reused == len(small_catalog.deferred)


def test_memory_only_cache_and_unwritable_dir(encoder, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", "off")
    from playground.engine.search.embedding_cache import default_cache_path

    assert default_cache_path() is None
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = EmbeddingCache(blocker / "sub" / "embeddings.sqlite3", encoder.dim)  # cannot be created
    catalog = ToolCatalog([mcp("a", "b", "c")])
    _, stats = embed_tools(catalog.deferred, encoder.encode, cache, model_id="m")
    assert stats.encoded == 1
    _, stats = embed_tools(catalog.deferred, encoder.encode, cache, model_id="m")
    assert stats.reused == 1


def test_missing_extra_gives_a_clear_error(monkeypatch):
    from playground.engine.search import encoder as encoder_module

    monkeypatch.setattr(encoder_module.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("TOOLSEARCH_EMBEDDING_MODEL_DIR", raising=False)
    with pytest.raises(encoder_module.EncoderUnavailable, match="semantic extra is not installed"):
        encoder_module.find_model_dir()


def test_dense_alone_needs_a_shared_word_a_clear_match_or_language(encoder, embeddings_dir, small_catalog):
    """No stem in common with the catalog, no cosine ≥ 0.45 and no words: "no match" (language_gate.py);
    a request in words that shares none with the catalog still gets its nearest tools."""
    backend = SemanticBackend()
    assert backend.search("zzzz qqqq wxqv", small_catalog).matches == []
    assert backend.search("do I need an umbrella tomorrow", small_catalog).matches[0] == "mcp__weather__get_forecast"
    assert backend.search("do I need an umbrella tomorrow in my city", small_catalog).matches[0] == "mcp__weather__get_forecast"


def test_query_embedder_batches_misses_and_keeps_what_a_prefetch_touched():
    from playground.engine.search.semantic import QueryEmbedder

    class FakeEncoder:
        calls: list[list[str]] = []

        def encode(self, texts, *, concurrent_runs=1):
            self.calls.append(list(texts))
            return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

        def encode_one(self, text):
            return self.encode([text])[0]

    encoder = FakeEncoder()
    embedder = QueryEmbedder(encoder, size=2)
    embedder.prefetch(["a", "bb", "a"])
    assert encoder.calls == [["a", "bb"]]  # one batch, each text once
    embedder.prefetch(["a", "ccc"])  # "a" is used again, so "bb" is the one to go
    assert encoder.calls[-1] == ["ccc"]
    assert embedder("a")[0] == 1.0 and embedder("ccc")[0] == 3.0
    assert len(encoder.calls) == 2  # both answered from the cache
    embedder("bb")
    assert encoder.calls[-1] == ["bb"]  # evicted, so encoded again


def test_a_model_folder_other_than_the_packaged_one_gets_its_own_cache_key(encoder, tmp_path):
    """Vectors are cached by (model id, text): a fine-tuned or replaced model in
    TOOLSEARCH_EMBEDDING_MODEL_DIR must not be served the packaged model's vectors."""
    from playground.engine.search.encoder import MODEL_ID, model_id_of

    assert model_id_of(encoder.model_dir) == MODEL_ID
    first, second, same = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, content in ((first, b"weights one"), (second, b"weights two"), (same, b"weights one")):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(content)
    assert model_id_of(first) != MODEL_ID
    assert model_id_of(first) != model_id_of(second)
    assert model_id_of(first) == model_id_of(same)  # named by content, not by path


def test_pooled_pieces_come_from_one_pass_over_the_whole_text(encoder):
    from playground.engine.search.encoder import MiniLMEncoder

    text = "Get the weather forecast for Paris, and then book a flight to Rome."
    weather, flight = (0, text.index(",")), (text.index("book"), len(text))
    rows = encoder.encode_pooled(text, [weather, flight])
    assert rows.shape == (3, encoder.dim)
    assert np.array_equal(rows[0], encoder.encode([text])[0])  # row 0: the text's own vector, bit for bit
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    alone = encoder.encode([text[slice(*weather)], text[slice(*flight)]])
    # each piece is read in context: close to the piece encoded alone, closer than to the other piece
    assert rows[1] @ alone[0] > 0.7 and rows[1] @ alone[0] > rows[1] @ alone[1]
    assert rows[2] @ alone[1] > 0.7 and rows[2] @ alone[1] > rows[2] @ alone[0]
    assert not np.allclose(rows[1], alone[0], atol=1e-3)  # pooled, not encoded alone
    # a piece cut off by truncation has no token in the pass: it is encoded on its own
    short = MiniLMEncoder(encoder.model_dir, max_length=8)
    cut = short.encode_pooled(text, [weather, flight])
    assert np.allclose(cut[2], short.encode([text[slice(*flight)]])[0], atol=1e-6)
    assert not np.allclose(cut[1], short.encode([text[slice(*weather)]])[0], atol=1e-3)


def test_pooled_spans_follow_the_text_the_encoder_reads():
    from playground.engine.search.base import read_query
    from playground.engine.search.semantic import query_text_spans

    raw = "  send a +slack message, then open a +github issue"
    stripped = raw.strip()
    spans = [(0, stripped.index(",")), (stripped.index("open"), len(stripped))]
    text, moved = query_text_spans(read_query(raw), spans)
    assert text == "send a slack message, then open a github issue"
    assert [text[start:end] for start, end in moved] == ["send a slack message", "open a github issue"]


def test_query_embedder_caches_pooled_vectors_apart_from_the_pieces_alone():
    from playground.engine.search.semantic import QueryEmbedder

    class FakeEncoder:
        calls: list[tuple] = []

        def encode(self, texts, *, concurrent_runs=1):
            self.calls.append(("alone", *texts))
            return np.array([[float(len(t)), 0.0] for t in texts], dtype=np.float32)

        def encode_one(self, text):
            return self.encode([text])[0]

        def encode_pooled(self, text, spans):
            self.calls.append(("pooled", text, spans))
            return np.array([[float(len(text)), 0.0]] + [[0.0, float(end - start)] for start, end in spans], dtype=np.float32)

    encoder = FakeEncoder()
    embedder = QueryEmbedder(encoder)
    rows = embedder.pooled("ab cd", ((0, 2), (3, 5)))
    assert rows[:, 1].tolist() == [0.0, 2.0, 2.0]
    assert embedder.pooled("ab cd", ((0, 2), (3, 5))) is rows  # cached under (text, spans)
    assert embedder("ab cd")[0] == 5.0  # the pass also cached the whole text's own vector
    assert encoder.calls == [("pooled", "ab cd", ((0, 2), (3, 5)))]
    assert embedder("ab")[0] == 2.0 and encoder.calls[-1] == ("alone", "ab")  # a piece alone is its own entry
