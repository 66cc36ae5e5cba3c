from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from playground.engine.search import hybrid as hybrid_module
from playground.engine.search.backends import backend_from_spec
from playground.engine.search.encoder import EncoderUnavailable
from playground.engine.search.hybrid import HybridBackend, cover_aspects, split_aspects


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


def test_fusion_keeps_ties_in_catalog_order_and_positive_scores(encoder, embeddings_dir, small_catalog):
    result = HybridBackend().search("create a file", small_catalog, max_results=10)
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


@pytest.mark.parametrize("removed", [{"fusion": "rrf"}, {"server_routing": "evidence"}, {"server_diversity": 0.5}])
def test_options_that_lost_and_were_removed_are_refused_by_name(removed):
    # reciprocal-rank fusion, evidence-only server routing and server diversity (docs/search-quality.md)
    with pytest.raises(ValueError, match=next(iter(removed))):
        backend_from_spec("hybrid:" + ":".join(f"{k}={json.dumps(v)}" for k, v in removed.items()))


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


def test_a_request_is_split_into_clauses_only_when_it_lists_several_things():
    clauses = split_aspects("Get the stock profile, balance sheet data, cash flow statements and recommendation trends for Apple.")
    assert clauses == ["Get the stock profile", "balance sheet data", "cash flow statements", "recommendation trends for Apple."]
    assert split_aspects("weather forecast for Paris") == []
    # a fragment of fewer than two content words joins the clause before it
    assert split_aspects("Find flights to Rome, then hotels.") == []
    assert split_aspects("Find flights to Rome, then book hotels near the station") == ["Find flights to Rome", "book hotels near the station"]


def test_cover_aspects_gives_an_uncovered_clause_the_next_slot():
    # tools 0 and 1 both answer clause A best; tool 2 is the only one that answers clause B
    fused = np.array([1.0, 0.95, 0.8, 0.1], dtype=np.float32)
    clause_a = np.array([1.0, 0.98, 0.1, 0.0], dtype=np.float32)
    clause_b = np.array([0.1, 0.1, 1.0, 0.2], dtype=np.float32)
    picks = cover_aspects(fused, np.stack([clause_a, clause_b]), ["A", "B"], [0, 1, 2, 3], k=3, weight=0.3, sharpness=2.0)
    assert [i for i, _, _ in picks] == [0, 2, 1]
    gains = [gain for _, gain, _ in picks]
    assert gains == sorted(gains, reverse=True)
    assert picks[1][2].clause == "B" and picks[1][2].coverage > 0
    # without coverage the fused order stands
    plain = cover_aspects(fused, np.stack([clause_a, clause_b]), ["A", "B"], [0, 1, 2, 3], k=3, weight=0.0, sharpness=2.0)
    assert [i for i, _, _ in plain] == [0, 1, 2]


def test_hybrid_covers_each_part_of_a_request_and_explains_it(encoder, embeddings_dir, small_catalog):
    query = "read the file report.txt and email it to the team"
    # BM25F with the name weighted no more than the other fields, and the float model's vectors, gives
    # the case coverage is for on this small catalog (the tuned defaults already rank it well).
    bm25, dense = {"k1": 1.2, "field_weights": {"name": 1.0}}, {"runtime": "onnx"}
    without = HybridBackend(aspect_weight=0.0, bm25=bm25, semantic=dense).search(query, small_catalog, max_results=4)
    # fused alone, write_file (a "file" tool, like read_file) takes a slot before the e-mail clause gets one
    assert without.matches[:3] == ["mcp__files__read_file", "mcp__files__write_file", "mcp__mail__send_email"]
    assert all(c.term != "(aspects)" for s in without.scored for c in s.breakdown)
    result = HybridBackend(bm25=bm25, semantic=dense).search(query, small_catalog, max_results=4)
    assert result.matches[:2] == ["mcp__files__read_file", "mcp__mail__send_email"]
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True)
    for rank, scored in enumerate(result.scored):
        aspects = [c for c in scored.breakdown if c.term == "(aspects)"]
        assert len(aspects) == 1
        # the first two cover one clause each; after them both clauses are covered
        assert aspects[0].detail.startswith("best for" if rank < 2 else "nothing left to cover"), (rank, aspects[0].detail)
        assert sum(c.points for c in scored.breakdown) == pytest.approx(scored.score, abs=2e-3)
    assert "email it to the team" in result.scored[1].breakdown[-1].detail
    with pytest.raises(ValueError, match="aspect_weight"):
        HybridBackend(aspect_weight=1.0)


def test_describe_query_names_the_sentences_and_clauses_it_scores():
    backend = HybridBackend.__new__(HybridBackend)
    backend.intent_weight, backend.aspect_weight, backend.piece_vectors, backend.semantic = 0.3, 0.3, "alone", object()
    backend.capability_rank = 0  # capability lines: tests/search/test_capabilities.py
    backend.query_frame = ""  # the frame's line: test_describe_query_shows_how_the_encoder_reads_the_request
    lines = backend.describe_query("Find the weather in Paris for tomorrow. Then email the forecast to my team")
    assert len(lines) == 2
    assert lines[0].startswith("2 sentences, each also scored alone (share 0.3): ")
    assert lines[1].startswith("2 clauses for aspect coverage") and "\u201cThen email the forecast to my team\u201d" in lines[1]
    backend.piece_vectors = "pooled"
    assert backend.describe_query("Find the weather in Paris for tomorrow. Then email the forecast to my team")[2] == (
        "sentence and clause vectors pooled from one pass over the request (late chunking)"
    )
    backend.semantic = None  # no dense side (the extra is missing): nothing is pooled, so no such note
    assert len(backend.describe_query("Find the weather in Paris for tomorrow. Then email the forecast to my team")) == 2
    assert backend.describe_query("weather forecast") == []
    assert backend.describe_query("select:a,b") == []
    backend.intent_weight = backend.aspect_weight = 0.0
    assert backend.describe_query("Find the weather in Paris for tomorrow. Then email the forecast to my team") == []


def test_a_pasted_document_is_read_whole_not_as_hundreds_of_clauses():
    from playground.engine.search.hybrid import MAX_PIECES, split_intents

    many = ", ".join(f"check item number {i}" for i in range(MAX_PIECES + 1))
    assert split_aspects(many) == []
    assert len(split_aspects(", ".join(f"check item number {i}" for i in range(MAX_PIECES)))) == MAX_PIECES
    sentences = " ".join(f"Please check the item number {i}." for i in range(MAX_PIECES + 1))
    assert split_intents(sentences) == []


def test_pieces_carry_their_spans_in_the_request():
    from playground.engine.search.hybrid import _CLAUSE_BREAK, _split_pieces

    query = "  Find flights to Rome, then book hotels near the station, and the cars."
    pieces = _split_pieces(query, _CLAUSE_BREAK, 2)
    stripped = query.strip()
    assert [text for text, _ in pieces] == ["Find flights to Rome", "book hotels near the station the cars."]
    # a short fragment joins the piece before it: the text is joined by a space, the span reaches over the break
    assert [stripped[start:end] for _, (start, end) in pieces] == ["Find flights to Rome", "book hotels near the station, and the cars."]


def test_pooled_piece_vectors_encode_a_request_once_and_say_so(encoder, embeddings_dir, small_catalog, monkeypatch):
    query = "read the file report.txt and email it to the team"
    bm25 = {"k1": 1.2, "field_weights": {"name": 1.0}}
    alone = HybridBackend(bm25=bm25)
    pooled = HybridBackend(bm25=bm25, piece_vectors="pooled")
    calls: list[str] = []
    for method in ("encode", "encode_pooled"):
        original = getattr(encoder, method)
        monkeypatch.setattr(encoder, method, lambda *args, _original=original, _method=method, **kwargs: calls.append(_method) or _original(*args, **kwargs))
    alone.search("warm up the catalog vectors", small_catalog)
    pooled.semantic.embed_query.clear()
    calls.clear()
    result = pooled.search(query, small_catalog, max_results=4)
    assert calls == ["encode_pooled"]  # the request and its two clauses: one pass
    assert result.matches[:2] == ["mcp__files__read_file", "mcp__mail__send_email"]
    assert "clause vectors pooled from the request's tokens" in result.scored[0].breakdown[-1].detail
    for scored in result.scored:
        assert sum(c.points for c in scored.breakdown) == pytest.approx(scored.score, abs=2e-3)
    pooled.semantic.embed_query.clear()
    calls.clear()
    alone.search(query, small_catalog, max_results=4)
    assert calls == ["encode"]  # one batch too, but of the request and each clause as texts of their own
    with pytest.raises(ValueError, match="piece_vectors"):
        HybridBackend(piece_vectors="late")


def test_the_request_and_its_sentences_are_scored_in_one_product(encoder, embeddings_dir, small_catalog):
    from playground.engine.search.base import read_query

    backend = HybridBackend()
    index = backend.index_for(small_catalog)
    query = "Find the weather forecast for Paris tomorrow. Then email the forecast to my team"
    intents = hybrid_module.split_intents(query)
    rows = backend.dense_rows(read_query(query), intents, [None] * len(intents), index)
    assert rows.shape == (1 + len(intents), index.semantic.size)
    for row, text in zip(rows, [query, *intents]):  # each row is that text's own cosine to every tool
        assert np.allclose(row, backend.semantic.similarities(read_query(text), index.semantic), atol=1e-6)
    result = backend.search(query, small_catalog, max_results=3)
    assert result.matches[0] == "mcp__weather__get_forecast" and "mcp__mail__send_email" in result.matches
    assert any(c.term == "(sentences)" for c in result.scored[0].breakdown)


def test_hybrid_pooled_is_hybrid_with_pooled_pieces_under_its_own_name(embeddings_dir):
    from playground.engine.search.backends import backend_from_spec, get_backend

    backend = get_backend("hybrid-pooled")
    assert backend.name == "hybrid-pooled" and backend.piece_vectors == "pooled"
    assert get_backend("hybrid").piece_vectors == "alone"
    assert backend_from_spec("hybrid-pooled:aspect_weight=0").aspect_weight == 0  # its other settings stay open


class RecordingEmbedder:
    """The backend's query embedder, noting every text the encoder is asked to read."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def __call__(self, text):
        self.texts.append(text)
        return self.inner(text)

    def prefetch(self, texts):
        self.texts.extend(texts)
        self.inner.prefetch(texts)

    def pooled(self, text, spans):
        self.texts.append(text)
        self.pieces = [text[start:end] for start, end in spans]
        return self.inner.pooled(text, spans)

    def clear(self):
        self.inner.clear()


ONE_SENTENCE = "Can you tell me what the weather will be like in Paris over the next days?"


def read_by_encoder(backend: HybridBackend, query: str, catalog) -> tuple[list[str], object]:
    backend.semantic.embed_query = recorder = RecordingEmbedder(backend.semantic.embed_query)
    result = backend.search(query, catalog, max_results=3)
    return recorder.texts, result


def test_a_one_sentence_request_is_read_by_the_encoder_as_what_a_tool_does(encoder, embeddings_dir, small_catalog):
    texts, result = read_by_encoder(HybridBackend(), ONE_SENTENCE, small_catalog)
    framed = f"a tool to {ONE_SENTENCE}"
    assert framed in texts and ONE_SENTENCE not in texts
    assert result.matches[0] == "mcp__weather__get_forecast"
    dense = next(c for c in result.scored[0].breakdown if c.field == "embedding")
    assert dense.detail.endswith(f"to \u201c{framed}\u201d")
    # its clauses are framed too ("…, and …" splits it into two)
    clauses = "Find the weather forecast for Paris for the next days and create an issue about it in my repository"
    texts, _ = read_by_encoder(HybridBackend(), clauses, small_catalog)
    assert "a tool to Find the weather forecast for Paris for the next days" in texts


def test_keyword_queries_and_requests_of_several_sentences_are_read_as_typed(encoder, embeddings_dir, small_catalog):
    texts, result = read_by_encoder(HybridBackend(), "weather forecast paris days", small_catalog)
    assert texts and not any(t.startswith("a tool to") for t in texts)
    assert "to \u201c" not in next(c for c in result.scored[0].breakdown if c.field == "embedding").detail
    two = "I am planning a trip to France next week. What will the weather be like in Paris?"
    texts, _ = read_by_encoder(HybridBackend(), two, small_catalog)
    assert two in texts and not any(t.startswith("a tool to") for t in texts)
    texts, _ = read_by_encoder(HybridBackend(query_frame=""), ONE_SENTENCE, small_catalog)
    assert ONE_SENTENCE in texts and not any(t.startswith("a tool to") for t in texts)


def test_describe_query_shows_how_the_encoder_reads_the_request(encoder):
    lines = HybridBackend().describe_query(ONE_SENTENCE)
    assert f"the encoder reads the request as \u201ca tool to {ONE_SENTENCE}\u201d (a one-sentence request, read as what a tool does)" in lines
    assert not any("encoder reads" in line for line in HybridBackend(query_frame="").describe_query(ONE_SENTENCE))
    assert HybridBackend().describe_query("weather forecast paris days") == []


@pytest.mark.parametrize("frame", ["a tool to", "{} and {}", 3])
def test_a_query_frame_needs_one_place_for_the_request(frame):
    with pytest.raises(ValueError, match="query_frame"):
        HybridBackend(query_frame=frame)


def test_pooled_pieces_are_found_in_the_framed_request(encoder, embeddings_dir, small_catalog):
    request = "Find the weather forecast for Paris for the next days and create an issue about it in my repository"
    backend = HybridBackend(piece_vectors="pooled")
    backend.semantic.embed_query = recorder = RecordingEmbedder(backend.semantic.embed_query)
    backend.search(request, small_catalog, max_results=3)
    assert recorder.texts[0] == f"a tool to {request}"
    # the clauses' spans moved with the frame: each still covers its own words
    assert recorder.pieces == ["Find the weather forecast for Paris for the next days", "create an issue about it in my repository"]


def test_side_ranks_count_better_tools_and_earlier_ties_over_the_whole_catalog():
    """`_ranks` looks at the tools that score at least the lowest wanted one (one pass over the
    catalog), and ranks as counting over every tool did: better ones, then ties in catalog order."""
    rng = np.random.default_rng(7)
    scores = np.round(rng.random(5_000), 2).astype(np.float32)  # many ties
    scores[100:140] = 0.0
    wanted = [int(i) for i in rng.choice(5_000, 12, replace=False)] + [110, 4_999]

    def counted(scores: np.ndarray, i: int) -> int:
        return int(np.count_nonzero(scores > scores[i])) + int(np.count_nonzero(scores[:i] == scores[i])) + 1

    assert hybrid_module._ranks(scores, wanted) == {i: counted(scores, i) for i in wanted}
    with_nan = scores.copy()  # a NaN among the wanted: counted over every tool, as before
    with_nan[wanted[0]] = np.nan
    assert hybrid_module._ranks(with_nan, wanted[:3]) == {i: counted(with_nan, i) for i in wanted[:3]}
    assert hybrid_module._ranks(None, wanted) == {} and hybrid_module._ranks(scores, []) == {}
