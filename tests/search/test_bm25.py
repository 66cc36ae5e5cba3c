from __future__ import annotations

import numpy as np
import pytest

from playground.engine.search.base import read_query
from playground.engine.search.bm25 import BM25Backend, top_indices
from playground.engine.tools import ToolCatalog


def test_ranks_the_obvious_tool_first(small_catalog):
    backend = BM25Backend()
    assert backend.search("weather forecast for Paris", small_catalog).matches[0] == "mcp__weather__get_forecast"
    assert backend.search("open a new github issue", small_catalog).matches[0] == "mcp__github__create_issue"
    assert backend.search("convert timezone", small_catalog).matches[0] == "mcp__time__convert_time"
    # stemming: "emails"/"sending" reach send_email
    assert backend.search("sending emails", small_catalog).matches[0] == "mcp__mail__send_email"


def test_only_deferred_tools_and_only_positive_scores(small_catalog):
    result = BM25Backend().search("read file", small_catalog, max_results=10)
    assert "Read" not in result.matches  # not deferred
    assert all(s.score > 0 for s in result.scored)
    assert BM25Backend().search("the of and", small_catalog).matches == []  # stopwords only


def test_explanation_is_per_term_per_field_and_adds_up_to_the_score(small_catalog):
    result = BM25Backend().search("weather forecast city", small_catalog)
    top = result.scored[0]
    fields = {c.field for c in top.breakdown}
    assert {"name", "description", "server", "schema"} <= fields
    assert {c.term for c in top.breakdown} == {"weather", "forecast", "city", "(server)"}
    server = next(c for c in top.breakdown if c.term == "(server)")
    assert server.rule == "server's best tool" and "weather" in server.detail
    assert sum(c.points for c in top.breakdown) == pytest.approx(top.score, abs=1e-3)


def test_every_result_is_explained_by_its_own_terms(small_catalog):
    """The explanations of all results come from one batched posting lookup: each must equal the
    lookup for that tool alone, and add up to its own score."""
    backend = BM25Backend()
    result = backend.search("create a new file or an issue in a repository", small_catalog, max_results=10)
    assert len(result.scored) >= 4
    index = backend.index_for(small_catalog)
    pairs = backend.query_tokens(read_query("create a new file or an issue in a repository"))
    docs = [[t.name for t in index.tools].index(s.name) for s in result.scored]
    batched = backend.term_contributions(docs, pairs, index)
    for doc, scored, terms in zip(docs, result.scored, batched):
        assert terms == backend.term_contributions([doc], pairs, index)[0]
        assert [c for c in scored.breakdown if c.term != "(server)"] == terms
        assert sum(c.points for c in scored.breakdown) == pytest.approx(scored.score, abs=1e-3)
    assert len({tuple(c.detail for c in t) for t in batched}) >= 4  # not one tool's terms repeated


def test_field_weights_decide_which_fields_count(small_catalog):
    # "repository" is only in descriptions (create_issue, list_pull_requests, search_code).
    default = BM25Backend(server_weight=0).search("repository", small_catalog, max_results=10)
    assert set(default.matches) == {"mcp__github__create_issue", "mcp__github__list_pull_requests", "mcp__github__search_code"}
    names_only = BM25Backend(field_weights={"description": 0.0, "schema": 0.0}, server_weight=0).search("repository", small_catalog)
    assert names_only.matches == []
    with pytest.raises(ValueError, match="unknown BM25 field"):
        BM25Backend(field_weights={"title": 1.0})
    # Weights that are not numbers are a clear error when the backend is made, not a TypeError mid-search.
    for bad in ({"name": "x"}, {"name": True}, 3):
        with pytest.raises(ValueError, match="field_weights must map fields to numbers"):
            BM25Backend(field_weights=bad)
    with pytest.raises(ValueError, match="field_b must map fields to numbers"):
        BM25Backend(field_b={"name": "x"})


def test_ties_keep_catalog_order():
    from tests.search.conftest import mcp

    catalog = ToolCatalog([mcp("a", f"tool_{i}", "identical text about widgets") for i in range(8)])
    result = BM25Backend().search("widgets", catalog, max_results=5)
    assert result.matches == [f"mcp__a__tool_{i}" for i in range(5)]
    scores = np.array([1.0, 3.0, 3.0, 0.0, 2.0, 3.0], dtype=np.float32)
    assert top_indices(scores, 3) == [1, 2, 5]
    assert top_indices(scores, 10) == [1, 2, 5, 4, 0]


def test_index_follows_the_catalog_and_reanalyses_only_changed_tools(small_catalog, monkeypatch):
    from playground.engine.search import text
    from tests.search.conftest import mcp

    backend = BM25Backend()
    backend.search("weather", small_catalog)
    calls: list[str] = []
    original = text.analyze
    monkeypatch.setattr(text, "analyze", lambda value: calls.append(value) or original(value))
    changed = ToolCatalog([*small_catalog.tools, mcp("notes", "add_note", "Add a sticky note about zebras")])
    assert backend.search("zebras", changed).matches == ["mcp__notes__add_note"]
    assert len(calls) == len(text.FIELDS) + 1  # the new tool's fields, plus the query term


def test_server_routing_lifts_siblings_of_the_best_match(small_catalog):
    query = "open an issue"
    plain = BM25Backend(server_weight=0).search(query, small_catalog, max_results=10)
    routed = BM25Backend(server_weight=0.5).search(query, small_catalog, max_results=10)
    assert plain.matches[0] == routed.matches[0] == "mcp__github__create_issue"
    # search_code shares no word with the query: only its server's best match brings it in
    assert "mcp__github__search_code" not in plain.matches
    assert "mcp__github__search_code" in routed.matches
    sibling = next(s for s in routed.scored if s.name == "mcp__github__search_code")
    assert [c.rule for c in sibling.breakdown] == ["server's best tool"]


# -- BM25F (scoring="bm25f") -------------------------------------------------------------------


def _bm25f_by_hand(backend: BM25Backend, catalog: ToolCatalog, tokens: list[str]) -> np.ndarray:
    """Robertson, Zaragoza & Taylor (2004), written out plainly: per tool, Σ over query stems of
    idf(t) × tf~ / (k1 + tf~), tf~ = Σ_f w_f × tf_f / (1 − b_f + b_f × len_f / avglen_f)."""
    import math

    from playground.engine.search.bm25 import analyzed_fields

    tools = list(catalog.deferred)
    fields = [analyzed_fields(t) for t in tools]
    weights = {f: w for f, w in backend.field_weights.items() if w > 0}
    n = len(tools)
    average = {f: sum(len(a[f]) for a in fields) / n for f in weights}
    out = np.zeros(n)
    for token in tokens:
        df = sum(1 for a in fields if any(token in a[f] for f in weights))
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for d, a in enumerate(fields):
            b = backend.field_b
            tf = sum(w * a[f].count(token) / (1 - b[f] + b[f] * len(a[f]) / average[f]) for f, w in weights.items() if average[f] > 0)
            out[d] += idf * tf / (backend.k1 + tf)
    return out


@pytest.mark.parametrize("options", [{}, {"k1": 2.0, "field_weights": {"name": 2.0}, "field_b": {"name": 0.3}}])
def test_bm25f_scores_are_the_textbook_formula(small_catalog, options):
    backend = BM25Backend(scoring="bm25f", **options)
    index = backend.index_for(small_catalog)
    for query in ("weather forecast city", "create a new file or an issue in a repository", "time zone"):
        tokens = [t for t, _ in backend.query_tokens(read_query(query))]
        assert backend.score_all(tokens, index) == pytest.approx(_bm25f_by_hand(backend, small_catalog, tokens), abs=1e-5)


def test_bm25f_explanation_shares_each_term_among_its_fields(small_catalog):
    backend = BM25Backend(scoring="bm25f")
    result = backend.search("create a new file or an issue in a repository", small_catalog, max_results=10)
    assert len(result.scored) >= 4
    for scored in result.scored:
        assert sum(c.points for c in scored.breakdown) == pytest.approx(scored.score, abs=1e-3)
        assert all(c.rule.startswith("bm25f ") or c.term == "(server)" for c in scored.breakdown)
    top = BM25Backend(scoring="bm25f").search("weather forecast city", small_catalog).scored[0]
    assert {"name", "description", "server", "schema"} <= {c.field for c in top.breakdown}
    index = backend.index_for(small_catalog)
    pairs = backend.query_tokens(read_query("create a new file or an issue in a repository"))
    docs = [[t.name for t in index.tools].index(s.name) for s in result.scored]
    batched = backend.term_contributions(docs, pairs, index)
    for doc, terms in zip(docs, batched):
        assert terms == backend.term_contributions([doc], pairs, index)[0]
    # Each term's shares add up to the score its posting holds for that tool (the one ranking used).
    for doc, terms in zip(docs, batched):
        for token, term in pairs:
            shares = [c.points for c in terms if c.term == term and f"stem '{token}'" in c.detail]
            hit = index.bm25f.postings(token)
            posting = dict(zip(hit[0].tolist(), hit[1].tolist())) if hit is not None else {}
            assert (sum(shares) if shares else None) == (pytest.approx(posting[doc], abs=1e-4 * len(shares)) if doc in posting else None)


def test_bm25f_options_are_checked():
    with pytest.raises(ValueError, match="scoring"):
        BM25Backend(scoring="bm42")
    with pytest.raises(ValueError, match="was removed"):
        BM25Backend(scoring="fields")  # the per-field scoring lost the evaluation
    assert BM25Backend(scoring="bm25f").k1 == BM25Backend().k1  # specs saved with the option still load
    with pytest.raises(ValueError, match="unknown BM25 field"):
        BM25Backend(scoring="bm25f", field_b={"title": 0.5})


def test_server_boost_is_each_servers_best_score_with_or_without_serverless_tools():
    """`ServerGroups.boost`: weight × the best score among the tool's server (never below 0), 0 for
    a tool without a server; the catalog where every tool has a server takes a shorter path."""
    from playground.engine.search.bm25 import ServerGroups
    from playground.engine.tools import Tool

    rng = np.random.default_rng(3)
    servers = [f"s{int(k)}" for k in rng.integers(0, 40, 400)]
    scores = rng.random(400).astype(np.float32) - np.float32(0.2)  # some negative: a server's best starts at 0

    def expected(names: list[str]) -> np.ndarray:
        best: dict[str, float] = {}
        for name, score in zip(names, scores):
            if name:
                best[name] = max(best.get(name, 0.0), float(score))
        return np.array([np.float32(0.6) * np.float32(best[name]) if name else 0.0 for name in names], dtype=np.float32)

    for names in (servers, [name if i % 7 else "" for i, name in enumerate(servers)]):
        groups = ServerGroups([Tool(name=f"t{i}", description="d", server=name) for i, name in enumerate(names)])
        boosted = groups.boost(scores, 0.6)
        assert boosted.dtype == np.float32 and np.allclose(boosted, expected(names), rtol=0, atol=1e-7)
