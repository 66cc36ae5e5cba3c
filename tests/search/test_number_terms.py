"""`+` before a number in a natural-language request (a phone number, a country code) is not a
required-term marker for the default backend (required.numbers_as_words): "check +4915123577723"
kept only tools whose text holds those digits — none —, an empty answer to a real request. The
Claude Code backend, keyword-style queries and `+word` keep the Claude Code reading."""
from __future__ import annotations

import pytest

from playground.engine.search.backends import get_backend
from playground.engine.search.base import read_query
from playground.engine.search.required import number_term, numbers_as_words

PHONE_REQUEST = "I want to check if the phone number +4915123577723 is valid and send an e-mail about it."


@pytest.mark.parametrize("term", ["4915123577723", "1", "1-800-555-0199", "1234567890,", "11112222333.", "44(0)20/7946"])
def test_numbers_are_number_terms(term):
    assert number_term(term)


@pytest.mark.parametrize("term", ["github", "e-mail", "2fa", "1password", "mp3", ""])
def test_words_are_not(term):
    assert not number_term(term)


def test_numbers_become_ordinary_terms_and_words_stay_required():
    reading = numbers_as_words(read_query("+github issues for +4915123577723, +1 please"))
    assert reading.required == ("github",)
    assert reading.optional[-2:] == ("4915123577723,", "1")
    assert "+4915123577723," in reading.note and "+1" in reading.note
    untouched = read_query("+github +e-mail")
    assert numbers_as_words(untouched) is untouched


@pytest.mark.parametrize("name", ["hybrid", "hybrid-pooled"])
def test_the_default_backend_answers_a_request_with_a_phone_number(name, encoder, embeddings_dir, small_catalog):
    result = get_backend(name).search(PHONE_REQUEST, small_catalog)
    assert result.matches and result.matches[0] == "mcp__mail__send_email"
    assert result.reading.required == () and "4915123577723" in result.reading.optional
    assert "read as a number" in result.reading.note
    # Claude Code itself reads it as a required term: nothing matches (parity kept there)
    assert get_backend("claude-code").search(PHONE_REQUEST, small_catalog).matches == []


@pytest.mark.parametrize("query", ["+4915123577723", "e-mail +4915123577723", "send e-mail +1"])
def test_keyword_style_queries_keep_the_required_number(query, encoder, embeddings_dir, small_catalog):
    result = get_backend("hybrid").search(query, small_catalog)
    assert result.matches == [] and result.reading.required and not result.reading.note


def test_a_required_word_in_a_request_still_filters(encoder, embeddings_dir, small_catalog):
    result = get_backend("hybrid").search("Please open an issue for the +github repository about the number +1 on the page", small_catalog, max_results=10)
    assert result.reading.required == ("github",)
    assert result.matches and all(name.startswith("mcp__github__") for name in result.matches)
