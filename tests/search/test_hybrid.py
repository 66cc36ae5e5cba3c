from __future__ import annotations

import logging

import numpy as np
import pytest

from playground.engine.search import hybrid as hybrid_module
from playground.engine.search.encoder import EncoderUnavailable
from playground.engine.search.hybrid import HybridBackend


def test_hybrid_ranks_and_explains_both_sides(encoder, embeddings_dir, small_catalog):
    result = HybridBackend().search("weather forecast for Paris", small_catalog)
    assert result.matches[0] == "mcp__weather__get_forecast"
    top = result.scored[0]
    sides = {c.field: c for c in top.breakdown}
    assert set(sides) == {"bm25", "embedding", "server", "query"} - ({"query"} if "(sentences)" not in str(top.breakdown) else set())
    assert "bm25 rank 1" in sides["bm25"].detail and "weather→" in sides["bm25"].detail
    assert "dense rank" in sides["embedding"].detail and "cosine" in sides["embedding"].detail
    assert sum(c.points for c in top.breakdown) == pytest.approx(top.score, abs=1e-3)


def test_hybrid_finds_what_only_one_side_finds(encoder, embeddings_dir, small_catalog):
    backend = HybridBackend()
    # one shared word ("city", in two schemas' wording at most): the dense side decides
    assert backend.search("is it going to rain tomorrow in my city", small_catalog).matches[0] == "mcp__weather__get_forecast"
    # an identifier-like keyword: the lexical side carries it
    assert backend.search("merge_request gitlab", small_catalog).matches[0] == "mcp__gitlab__create_merge_request"


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_both_fusions_keep_ties_in_catalog_order_and_positive_scores(encoder, embeddings_dir, small_catalog, fusion):
    result = HybridBackend(fusion=fusion).search("create a file", small_catalog, max_results=10)
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    with pytest.raises(ValueError, match="fusion"):
        HybridBackend(fusion="max")


def test_rrf_gives_rank_shares():
    backend = HybridBackend.__new__(HybridBackend)
    backend.bm25_weight, backend.dense_weight, backend.rrf_k, backend.depth = 1.0, 1.0, 60.0, 2
    shares = backend._rrf(np.array([0.0, 3.0, 5.0, 1.0], dtype=np.float32), positive_only=True)
    assert shares.tolist() == pytest.approx([0.0, 1 / 62, 1 / 61, 0.0])


def test_without_the_semantic_extra_hybrid_falls_back_to_bm25_and_says_why(small_catalog, monkeypatch, caplog):
    from playground.engine.search import semantic

    def unavailable(*args, **kwargs):
        raise EncoderUnavailable("the semantic extra is not installed (test)")

    monkeypatch.setattr(semantic, "shared_encoder", unavailable)
    monkeypatch.setattr(hybrid_module, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="playground.engine.search.hybrid"):
        backend = HybridBackend()
    assert "BM25 only" in caplog.text and "not installed" in caplog.text
    result = backend.search("weather forecast", small_catalog)
    assert result.matches[0] == "mcp__weather__get_forecast"
    assert any(c.rule == "dense side unavailable" and "not installed" in c.detail for c in result.scored[0].breakdown)


def test_long_queries_weigh_the_bm25_side_more():
    backend = HybridBackend.__new__(HybridBackend)
    backend.fusion, backend.bm25_weight, backend.dense_weight = "weighted", 0.2, 1.0
    backend.bm25_weight_long, backend.long_query_terms = 0.4, 15
    assert backend.lexical_weight(14) == 0.2 and backend.lexical_weight(15) == 0.4
    lexical = np.array([0.0, 2.0, 4.0], dtype=np.float32)
    dense = np.array([0.5, 0.1, -0.2], dtype=np.float32)
    short_part, _ = backend.fuse(lexical, dense, backend.lexical_weight(3))
    long_part, dense_part = backend.fuse(lexical, dense, backend.lexical_weight(20))
    assert short_part.tolist() == pytest.approx([0.0, 0.1, 0.2])
    assert long_part.tolist() == pytest.approx([0.0, 0.2, 0.4])
    assert dense_part.tolist() == pytest.approx([0.5, 0.1, 0.0])
