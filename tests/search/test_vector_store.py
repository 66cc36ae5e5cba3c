"""Where tool vectors are kept (`VectorStore`): memory, the SQLite file, or a store handed in."""
from __future__ import annotations

import numpy as np

from playground.engine.search.embedding_cache import (
    EmbeddingCache, MemoryVectorStore, SqliteVectorStore, VectorStore, embed_tools, shared_cache,
)
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.semantic import SemanticBackend, use_vector_store
from tests.search.fake_encoder import FakeEncoder


def test_memory_and_file_stores_keep_what_they_are_given(tmp_path):
    vector = np.arange(4, dtype=np.float32)
    for store in (MemoryVectorStore(), SqliteVectorStore(tmp_path / "v.sqlite3")):
        store.put_many({"a": vector}, model_id="m")
        assert set(store.get_many(["a", "b"], 4)) == {"a"}
        assert np.array_equal(store.get_many(["a"], 4)["a"], vector)
        assert store.get_many(["a"], 8) == {}  # another dimension is another model's
        assert store.missing_keys(["a", "b"], 4) == ["b"]


def test_two_caches_over_one_store_encode_each_tool_once(small_catalog):
    """Two processes (two memory layers) over one store: the second loads, never encodes."""
    store, encoder = MemoryVectorStore(), FakeEncoder()
    tools = list(small_catalog.deferred)
    first, stats = embed_tools(tools, encoder.encode, EmbeddingCache(None, encoder.dim, store=store), model_id="m")
    assert stats.encoded == len(tools) and len(encoder.texts) == len(tools)
    encoder.texts.clear()
    second, stats = embed_tools(tools, encoder.encode, EmbeddingCache(None, encoder.dim, store=store), model_id="m")
    assert stats.encoded == 0 and stats.reused == len(tools) and encoder.texts == []
    assert np.array_equal(first, second)


class RecordingStore(MemoryVectorStore):
    def __init__(self):
        super().__init__()
        self.models: list[str] = []

    def put_many(self, items, *, model_id=""):
        self.models.append(model_id)
        super().put_many(items, model_id=model_id)


def test_a_backend_handed_a_store_keeps_vectors_there_and_opens_no_file(small_catalog, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    store = RecordingStore()
    backend = HybridBackend(semantic={"encoder": FakeEncoder()})
    use_vector_store(backend, store)
    assert backend.search("weather forecast for a city", small_catalog).matches[0] == "mcp__weather__get_forecast"
    assert store.models == ["fake-encoder"] and len(store.get_many(backend.semantic.tool_keys(small_catalog), 32)) == len(small_catalog.deferred)
    assert not (tmp_path / "cache").exists()
    assert backend.semantic.cache is shared_cache(32, store=store)  # one memory layer per store per process
    assert isinstance(store, VectorStore)


def test_the_file_store_is_still_the_engine_default(small_catalog, embeddings_dir):
    backend = SemanticBackend(encoder=FakeEncoder())
    backend.search("weather", small_catalog)
    assert (embeddings_dir / "embeddings.sqlite3").is_file()


def test_missing_keys_are_found_without_reading_vectors_and_the_matrix_is_the_only_copy(small_catalog, monkeypatch):
    """`missing` asks the store for keys only; `keep_in_memory=False` reads each stored vector
    once, straight into the matrix (chunk by chunk), and leaves no copy in the memory layer."""
    store, encoder = MemoryVectorStore(), FakeEncoder()
    tools = list(small_catalog.deferred)
    expected, _ = embed_tools(tools, encoder.encode, EmbeddingCache(None, encoder.dim, store=store), model_id="m")
    cache = EmbeddingCache(None, encoder.dim, store=store)
    keys = list(store._vectors)
    read: list[int] = []
    real_get_many = store.get_many
    monkeypatch.setattr(store, "get_many", lambda ks, dim: read.append(len(ks)) or real_get_many(ks, dim))
    # A store that answers from its keys (as the database store does: a query for keys only).
    monkeypatch.setattr(store, "missing_keys", lambda ks, dim: [k for k in ks if k not in store._vectors])
    assert cache.missing([*keys, "not-a-key"]) == ["not-a-key"]
    assert read == []  # no vector read to answer it
    monkeypatch.setattr("playground.engine.search.embedding_cache.MATRIX_CHUNK", 2)
    encoder.texts.clear()
    matrix, stats = embed_tools(tools, encoder.encode, cache, model_id="m", keep_in_memory=False)
    assert np.array_equal(matrix, expected) and stats.encoded == 0 and encoder.texts == []
    assert max(read) <= 2 and sum(read) == len(tools)
    assert cache._memory == {}
