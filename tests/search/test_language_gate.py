"""The "no match" gate (language_gate.py): nonsense gets no answer, a real request always does."""
from __future__ import annotations

import pytest

from playground.engine.search import language_gate
from playground.engine.search.base import read_query
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.quality import NONSENSE_QUERIES
from playground.engine.search.semantic import SemanticBackend

NONSENSE = list(NONSENSE_QUERIES)
# Real requests that share no stem with the small catalog and reach no cosine 0.45 with any tool
# (the old gate left them unanswered, as it did 20 metatool test queries).
REAL = ["Who won the Copa America final in 2007?", "What NOTAMs are in effect for PHNL?", "北京后天的天气如何"]


def test_nonsense_reads_as_no_language_and_real_requests_do(encoder):
    vocabulary = language_gate.encoder_words(encoder)
    assert all(not language_gate.reads_as_language(q, vocabulary) for q in NONSENSE)
    assert all(language_gate.reads_as_language(q, vocabulary) for q in REAL)
    # a rarer word still reads as a word: WordPiece finds a long piece in it
    assert language_gate.language_share("passionately immeasurable arachnophobia", vocabulary) == 1.0


@pytest.mark.parametrize("backend", [HybridBackend, SemanticBackend])
def test_nonsense_gets_no_match_and_a_real_request_an_answer(encoder, embeddings_dir, small_catalog, backend):
    search = backend()
    for query in NONSENSE:
        assert search.search(query, small_catalog).matches == [], query
    for query in REAL:
        assert search.search(query, small_catalog).matches, query


def test_digits_alone_do_not_open_the_gate():
    assert not language_gate.has_words("12345 67890") and not language_gate.has_words("!!!! ????")
    assert language_gate.has_words("call 12345") and language_gate.has_words("北京")
    assert language_gate.dense_may_answer(0.9, lexical_hit=False, language=False, words=True)
    assert not language_gate.dense_may_answer(0.9, lexical_hit=False, language=False, words=False)


@pytest.mark.parametrize("backend", [HybridBackend, SemanticBackend])
def test_a_query_of_digits_gets_no_match_even_near_a_tool_with_digits(encoder, embeddings_dir, backend):
    """MiniLM puts "12345 67890" at cosine ≥ 0.45 from a tool whose text holds digits (bfcl's
    contact tools): a high cosine for a query without a word opens nothing."""
    from playground.engine.tools import ToolCatalog
    from tests.search.conftest import mcp

    catalog = ToolCatalog([mcp("phone", "lookup", "9876543210 11111 22222"), mcp("weather", "get_forecast", "Get the weather forecast for a city.")])
    search = backend()
    dense = search.semantic if isinstance(search, HybridBackend) else search
    similarity = dense.similarities(read_query("12345 67890"), dense.index_for(catalog))
    assert float(similarity.max()) >= language_gate.DENSE_ONLY_MIN_SIMILARITY  # the old rule would have answered
    assert search.search("12345 67890", catalog).matches == []
    assert search.search("look up the owner of this phone number for me", catalog).matches  # a real request still does


def test_the_default_backend_gives_no_match_to_digits_that_a_tool_holds(encoder, embeddings_dir):
    """bfcl holds "…_12345" in an identifier: a BM25 hit for "12345 67890", which opened the dense
    side. A query without a word asks for no operation: no match from the default backend."""
    from playground.engine.tools import ToolCatalog
    from tests.search.conftest import mcp

    catalog = ToolCatalog([mcp("apdex", "settings", "Apdex settings of an application by its id, e.g. 12345."),
                           mcp("phone", "lookup", "9876543210 11111 22222")])
    assert HybridBackend().bm25.search("12345 67890", catalog).matches  # the lexical hit is there
    assert HybridBackend().search("12345 67890", catalog).matches == []
    assert HybridBackend().search("+12345", catalog).matches  # a required term: the Claude Code rule, unchanged
