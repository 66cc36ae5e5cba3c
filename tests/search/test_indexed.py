"""IndexedOrFallback: a search never encodes a catalog while its vectors are being built."""
from __future__ import annotations

import pytest

from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.indexed import IndexedOrFallback
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp
from tests.search.fake_encoder import FakeEncoder


def _tool_texts(encoder: FakeEncoder) -> int:
    return sum(1 for text in encoder.texts if "(" in text)  # tool documents name their server


@pytest.fixture
def world(small_catalog):
    encoder, store = FakeEncoder(), MemoryVectorStore()
    hybrid = HybridBackend(semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=store)})
    asked: list[str] = []
    backend = IndexedOrFallback(hybrid, ClaudeCodeKeywordBackend(), inline_limit=2, on_missing=lambda: asked.append("build"),
                                describe_build=lambda: "search index being built: 0 of 11 tools embedded")
    return backend, encoder, store, asked


def _fill(store, catalog: ToolCatalog) -> None:
    """What the background build does: the vectors of the catalog, in the store."""
    builder = HybridBackend(semantic={"encoder": FakeEncoder(), "cache": EmbeddingCache(None, FakeEncoder.dim, store=store)})
    builder.semantic.index_for(catalog)


def test_without_vectors_the_keyword_backend_answers_and_says_so(world, small_catalog):
    backend, encoder, store, asked = world
    result = backend.search("create an issue in github", small_catalog)
    assert _tool_texts(encoder) == 0 and asked == ["build"]
    assert result.matches[0] == "mcp__github__create_issue"
    assert result.backend == "claude-code" and result.index_state == "fallback"
    assert result.notes == ["hybrid: answered by the claude-code keyword backend while the index is built; "
                            "search index being built: 0 of 11 tools embedded."]
    assert result.to_dict()["notes"] == result.notes and "notes" not in result.to_output()  # the model gets the usual output


def test_once_the_vectors_are_stored_the_backend_answers_without_encoding_them(world, small_catalog):
    backend, encoder, store, asked = world
    _fill(store, small_catalog)
    result = backend.search("create an issue in github", small_catalog)
    assert _tool_texts(encoder) == 0 and asked == []
    assert result.backend == "hybrid" and result.notes == [] and result.index_state == ""
    assert any(c.field == "embedding" for c in result.scored[0].breakdown)


def test_a_few_missing_vectors_are_encoded_in_the_request(world, small_catalog):
    backend, encoder, store, asked = world
    _fill(store, small_catalog)
    grown = ToolCatalog([*small_catalog.tools, mcp("jira", "create_ticket", "Create a Jira ticket.")])
    result = backend.search("create a ticket", grown)
    assert _tool_texts(encoder) == 1 and result.notes == [] and asked == []


def test_a_catalog_that_grew_is_searched_in_its_last_complete_index_meanwhile(world, small_catalog):
    backend, encoder, store, asked = world
    _fill(store, small_catalog)
    backend.search("weather", small_catalog)
    extra = [mcp(f"bulk{i}", "tool", f"Bulk tool number {i}") for i in range(5)]
    kept = [t for t in small_catalog.tools if t.name != "mcp__github__create_issue"]  # removed since
    grown = ToolCatalog([*kept, *extra])
    result = backend.search("create an issue in github", grown)
    assert _tool_texts(encoder) == 0 and asked == ["build"]
    assert result.backend == "hybrid" and result.index_state == "previous"
    assert "mcp__github__create_issue" not in result.matches and result.matches  # what is left of the old ranking
    assert result.notes[0].startswith("hybrid: answered from the last complete index (11 deferred tools; 5 added since are not searched yet)")
    assert result.total_deferred_tools == len(grown.deferred)


def test_special_forms_never_wait_for_the_index(world, small_catalog):
    backend, encoder, store, asked = world
    assert backend.search("select:mcp__mail__send_email", small_catalog).matches == ["mcp__mail__send_email"]
    exact = backend.search("mcp__files__read_file", small_catalog)
    assert exact.matches == ["mcp__files__read_file"] and exact.backend == "hybrid" and exact.notes == []
    assert _tool_texts(encoder) == 0


def test_the_wrapper_looks_like_the_backend_it_wraps(world):
    backend = world[0]
    assert backend.name == "hybrid" and backend.reads_usage and backend.semantic is backend.inner.semantic
    assert backend.describe_query("a, and b c d") == backend.inner.describe_query("a, and b c d")
    assert backend.degraded_reason == ""
