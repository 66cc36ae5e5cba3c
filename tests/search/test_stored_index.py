"""Prebuilt indexes (stored.py): a process that loads the stored index ranks exactly as one that
builds it, without analysing the catalog, making its tool documents or encoding a tool."""
from __future__ import annotations

import pytest

from playground.engine.catalog_io import load_catalog, toolsets_dir
from playground.engine.search import bm25 as bm25_module
from playground.engine.search import embedding_cache, stored
from playground.engine.search.bm25 import BM25Backend
from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.indexed import IndexedOrFallback
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp
from tests.search.fake_encoder import FakeEncoder

QUERIES = [
    "create an issue in github", "weather forecast for Rome", "+git create", "send an e-mail to Bob",
    "read a file. Then convert the time to Tokyo, and open a merge request", "jupyter notebook", "zzz nothing",
    "list pull requests and search the code", "select:mcp__github__create_issue",
]


def _hybrid(store: MemoryVectorStore, encoder: FakeEncoder | None = None) -> HybridBackend:
    encoder = encoder or FakeEncoder()
    return HybridBackend(semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=store)})


def _catalogs(small_catalog: ToolCatalog) -> list[ToolCatalog]:
    catalogs = [small_catalog]
    real = toolsets_dir() / "mcp-combined" / "catalog.jsonl"
    if real.exists():
        catalogs.append(load_catalog(real))
    return catalogs


def _results(backend, catalog: ToolCatalog) -> list[dict]:
    return [backend.search(query, catalog, max_results=8).to_dict() for query in QUERIES]


@pytest.mark.parametrize("which", [0, 1])
def test_a_loaded_index_ranks_exactly_as_a_fresh_build(small_catalog, which, monkeypatch):
    catalogs = _catalogs(small_catalog)
    if which >= len(catalogs):
        pytest.skip("the shared toolsets are not here")
    catalog = catalogs[which]
    vectors, index_store = MemoryVectorStore(), stored.MemoryIndexStore()
    builder = _hybrid(vectors)
    fresh = _results(builder, catalog)
    written = stored.save_indexes(builder, catalog, index_store)
    assert sorted(key.split(".")[0] for key in written) == ["bm25f", "dense"]

    # A fresh process: no analysis memo, no tool documents made, nothing encoded, no BM25 build.
    bm25_module._analysis_cache.clear()
    made: list[int] = []
    real_document_keys = embedding_cache.document_keys
    monkeypatch.setattr("playground.engine.search.semantic.document_keys",
                        lambda tools, *a, **k: made.append(len(tools)) or real_document_keys(tools, *a, **k))
    monkeypatch.setattr(BM25Backend, "build_index", lambda *a, **k: pytest.fail("the BM25 index was built, not loaded"))
    encoder = FakeEncoder()
    loader = _hybrid(vectors, encoder)
    stored.use_index_store(loader, index_store)
    wrapped = IndexedOrFallback(loader, ClaudeCodeKeywordBackend(), inline_limit=0)
    loaded = _results(wrapped, ToolCatalog(catalog.tools))  # the same tools, a catalog object of its own
    assert loaded == fresh
    assert encoder.texts == [text for text in encoder.texts if "(" not in text]  # only queries were encoded
    assert made == []
    # Only the tools an explanation showed were analysed (at most 8 per query).
    assert 0 < len(bm25_module._analysis_cache) <= 8 * len(QUERIES)


def test_a_stored_index_is_only_loaded_for_its_own_catalog_and_settings(small_catalog):
    index_store = stored.MemoryIndexStore()
    stored.save_indexes(BM25Backend(), small_catalog, index_store)
    grown = ToolCatalog([*small_catalog.tools, mcp("jira", "create_ticket", "Create a Jira ticket.")])
    other_catalog, other_settings = BM25Backend(), BM25Backend(k1=1.5)
    for backend in (other_catalog, other_settings):
        stored.use_index_store(backend, index_store)
    assert other_catalog.search("create a ticket", grown).matches[0] == "mcp__jira__create_ticket"
    plain = BM25Backend(k1=1.5)
    assert other_settings.search("create an issue", small_catalog).to_dict() == plain.search("create an issue", small_catalog).to_dict()
    assert len(index_store.keys()) == 1  # loading never writes


def test_an_unreadable_stored_index_is_rebuilt(small_catalog, caplog):
    index_store = stored.MemoryIndexStore()
    backend = BM25Backend()
    index_store.put(backend.stored_index_key(small_catalog), b"not an index")
    stored.use_index_store(backend, index_store)
    assert backend.search("create an issue", small_catalog).to_dict() == BM25Backend().search("create an issue", small_catalog).to_dict()
    assert "could not load the stored index" in caplog.text


def test_pack_keeps_arrays_strings_and_refuses_nul():
    import numpy as np

    data = stored.pack({"x": np.arange(5, dtype=np.int32)}, {"words": ["a", "é", ""], "none": []}, {"size": 3})
    arrays, texts, meta = stored.unpack(data)
    assert arrays["x"].tolist() == [0, 1, 2, 3, 4] and arrays["x"].dtype == np.int32
    assert texts == {"words": ["a", "é", ""], "none": []} and meta == {"size": 3}
    with pytest.raises(ValueError, match="NUL"):
        stored.pack({}, {"bad": ["a\x00b"]}, {})


class _CountingStore(MemoryVectorStore):
    """A vector store that counts what it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, int]] = []

    def get_many(self, keys, dim):
        self.asked.append(("get_many", len(keys)))
        return super().get_many(keys, dim)

    def missing_keys(self, keys, dim):
        self.asked.append(("missing_keys", len(keys)))
        return super().missing_keys(keys, dim)


def test_a_stored_index_brings_its_vectors_so_a_fresh_process_never_looks_them_up(small_catalog):
    """At 100,000 tools, looking each vector up by key in the vector store was most of a fresh
    process's first search: the stored dense index keeps the matrix it was built with."""
    catalog = _catalogs(small_catalog)[-1]
    vectors, index_store = _CountingStore(), stored.MemoryIndexStore()
    builder = _hybrid(vectors)
    fresh = _results(builder, catalog)
    stored.save_indexes(builder, catalog, index_store)
    vectors.asked.clear()
    loader = _hybrid(vectors)
    stored.use_index_store(loader, index_store)
    wrapped = IndexedOrFallback(loader, ClaudeCodeKeywordBackend(), inline_limit=0)
    assert _results(wrapped, ToolCatalog(catalog.tools)) == fresh
    assert vectors.asked == []  # neither "which are missing" nor the vectors themselves
    assert loader.semantic.index_for(catalog).stats.reused == len(catalog.deferred)


def test_a_stored_index_without_vectors_still_loads_them_from_the_vector_store(small_catalog):
    """Blobs stored before the vectors were kept in them give the keys; the store gives the vectors."""
    vectors, index_store = _CountingStore(), stored.MemoryIndexStore()
    builder = _hybrid(vectors)
    fresh = _results(builder, small_catalog)
    index = builder.semantic.index_for(small_catalog)
    index_store.put(builder.semantic.stored_index_key(small_catalog), builder.semantic._pack(index.keys, index.vocabulary))
    index_store.put(builder.bm25.stored_index_key(small_catalog), builder.bm25.stored_index_data(small_catalog))
    vectors.asked.clear()
    loader = _hybrid(vectors)
    stored.use_index_store(loader, index_store)
    wrapped = IndexedOrFallback(loader, ClaudeCodeKeywordBackend(), inline_limit=0)
    assert _results(wrapped, ToolCatalog(small_catalog.tools)) == fresh
    kinds = [kind for kind, _ in vectors.asked]
    assert kinds[0] == "missing_keys" and "get_many" in kinds


def test_unpack_reads_the_arrays_in_place_and_still_reads_older_blobs():
    """At 100,000 tools the dense blob's vectors are 150 MB: NumPy's `.npz` reader copied them in
    256 kB pieces through zipfile (a third of a fresh process's first search). `pack` aligns each
    member's data at 64 bytes, so `unpack` gives read-only views of the blob, aligned; a blob
    written by `np.savez` (before) is read as before."""
    import io

    import numpy as np

    from playground.engine.search import stored

    vectors = np.random.default_rng(0).standard_normal((1000, 384)).astype(np.float32)
    data = stored.pack({"vectors": vectors, "idf": np.arange(7.0)}, {"keys": ["a", "b"]}, {"size": 2})
    arrays, texts, meta = stored.unpack(data)
    assert np.array_equal(arrays["vectors"], vectors) and np.array_equal(arrays["idf"], np.arange(7.0))
    assert texts == {"keys": ["a", "b"]} and meta == {"size": 2}
    view = arrays["vectors"]
    assert not view.flags.owndata and not view.flags.writeable and view.flags.aligned
    assert np.shares_memory(view, np.frombuffer(data, dtype=np.uint8))
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:  # still an ordinary .npz
        assert np.array_equal(loaded["a.vectors"], vectors)

    older = io.BytesIO()
    np.savez(older, **{"a.vectors": vectors, "meta": np.frombuffer(b'{"size": 2}', dtype=np.uint8),
                       "t.keys": np.frombuffer(b"a\x00b", dtype=np.uint8), "n.keys": np.asarray([2])})
    arrays, texts, meta = stored.unpack(older.getvalue())
    assert np.array_equal(arrays["vectors"], vectors) and texts == {"keys": ["a", "b"]} and meta == {"size": 2}
