"""The "no match" gate (language_gate.py): nonsense gets no answer, a real request always does."""
from __future__ import annotations

import pytest

from playground.engine.search import language_gate
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
