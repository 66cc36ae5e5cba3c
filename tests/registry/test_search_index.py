"""Indexes off the request path: tool vectors stored in the database, built in the background, and
searches that never encode a catalog while it is being built."""
from __future__ import annotations

import numpy as np
import pytest

from playground.engine.search.embedding_cache import EmbeddingCache
from playground.engine.search.hybrid import HybridBackend
from playground.registry import adapter
from playground.registry.models import ToolEmbedding
from playground.registry.vectors import DatabaseVectorStore, make_store
from tests.search.fake_encoder import FakeEncoder

pytestmark = pytest.mark.django_db


def _process_backend(encoder: FakeEncoder) -> HybridBackend:
    """A backend as a fresh process has it: its own memory layer, the database behind it."""
    backend = HybridBackend(semantic={"encoder": encoder})
    backend.semantic.cache = EmbeddingCache(None, encoder.dim, store=DatabaseVectorStore())
    return backend


def test_two_processes_share_the_vectors_stored_in_the_database(tools):
    catalog = adapter.engine_catalog()
    first_encoder, second_encoder = FakeEncoder(), FakeEncoder()
    first = _process_backend(first_encoder).search("create a github issue", catalog)
    assert len(first_encoder.texts) == len(catalog.deferred) + 1  # the tools, then the query
    assert ToolEmbedding.objects.count() == len(catalog.deferred)
    row = ToolEmbedding.objects.first()
    assert row.model_id == "fake-encoder" and row.dim == 32 and len(bytes(row.vector)) == 32 * 4
    second = _process_backend(second_encoder).search("create a github issue", catalog)
    assert second_encoder.texts == ["create a github issue"]  # the query only: the tools were loaded
    assert second.matches == first.matches and second.scored[0].score == first.scored[0].score


def test_the_store_writes_a_key_once_and_reads_only_its_dimension(db):
    store = DatabaseVectorStore()
    store.put_many({"k": np.ones(4, dtype=np.float32)}, model_id="m")
    store.put_many({"k": np.ones(4, dtype=np.float32), "j": np.zeros(4, dtype=np.float32)}, model_id="m")
    assert ToolEmbedding.objects.count() == 2
    assert set(store.get_many(["k", "j", "x"], 4)) == {"k", "j"} and store.get_many(["k"], 8) == {}
    assert store.missing_keys(["k", "x"], 4) == ["x"]


def test_the_setting_picks_the_store(settings):
    assert isinstance(make_store("database"), DatabaseVectorStore)
    with pytest.raises(ValueError, match="TOOLSEARCH_VECTOR_STORE='disk'"):
        make_store("disk")
    settings.TOOLSEARCH_VECTOR_STORE = "database"
    backend = adapter.search_backend("hybrid")
    if backend.semantic is not None:  # with the semantic extra installed
        assert isinstance(backend.semantic.cache.store, DatabaseVectorStore)
