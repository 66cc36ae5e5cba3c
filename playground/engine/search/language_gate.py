"""The "no match" gate of the dense side: gibberish gets no answer, a real request always does.

A sentence encoder finds "something" for any text (gibberish reaches cosines of 0.2–0.4), so a
dense ranking alone cannot say "no match". The gate lets the dense side answer when the query
  - shares a stem with the catalog (lexical evidence), or
  - reaches cosine `DENSE_ONLY_MIN_SIMILARITY` with some tool (clearly similar) — only a query
    that holds a word: MiniLM puts "12345 67890" at cosine 0.45 from tools whose texts hold
    digits (contact and phone tools), which says nothing about what the query asks —, or
  - reads as language: at least `LANGUAGE_MIN_SHARE` of its content words (letters only, two or
    more, stopwords aside) are words to the encoder's own vocabulary (WordPiece keeps 30k
    frequent words whole, and cuts a rarer word into pieces of which one is long; gibberish
    falls apart into short pieces), or it is written mostly in a script other than Latin.
The third test is what the first two lacked: "Who won the Copa America final in 2007?" shares no
stem with a catalog of plugins and reaches no cosine 0.45, yet it is a request a tool may serve;
"zzzz qqqq" or "asdfgh jkl" is not. Calibrated on the shared toolsets' labelled queries (the
lowest share of a natural-language one without a shared stem: 1/3, "What NOTAMs are in effect for
PHNL?") and a set of nonsense queries (tests/search/test_language_gate.py: all at 0).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from playground.engine.search import text

DENSE_ONLY_MIN_SIMILARITY = 0.45
LANGUAGE_MIN_SHARE = 1 / 3
# A word the vocabulary does not hold whole still reads as a word when WordPiece finds a piece of
# this many letters in it ("passionately" → passionate + ##ly); a keyboard mash falls apart into
# pieces of one to three letters ("asdfgh" → as + ##df + ##gh).
KNOWN_PIECE_LETTERS = 5
_LETTERS = re.compile(r"[^\W\d_]{2,}")
# Beyond Latin (and IPA): scripts the English vocabulary cannot judge (CJK, Thai, Hangul, …).
_OTHER_SCRIPT = re.compile(r"[^\W\d_\u0000-\u02ff]")

_vocabularies: dict[int, tuple[Any, frozenset[str]]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Vocabulary:
    """An encoder's whole words and its tokenizer (to find the pieces of the others)."""

    words: frozenset[str]
    tokenizer: Any = None

    def __bool__(self) -> bool:
        return bool(self.words)

    def knows(self, word: str) -> bool:
        if word in self.words:
            return True
        if self.tokenizer is None:
            return False
        pieces = self.tokenizer.encode(word, add_special_tokens=False).tokens
        return any(len(piece.removeprefix("##")) >= KNOWN_PIECE_LETTERS for piece in pieces if piece != "[UNK]")


def encoder_words(encoder: Any) -> Vocabulary:
    """The encoder's WordPiece vocabulary (whole words, its `##` pieces aside); empty for an
    encoder without a tokenizer (then only the other two tests open the gate)."""
    with _lock:
        known = _vocabularies.get(id(encoder))
        if known is not None and known[0] is encoder:
            return known[1]
    tokenizer = getattr(encoder, "tokenizer", None)
    vocabulary = tokenizer.get_vocab() if tokenizer is not None else {}
    words = Vocabulary(frozenset(token for token in vocabulary if not token.startswith("##") and _LETTERS.fullmatch(token)), tokenizer)
    with _lock:
        _vocabularies[id(encoder)] = (encoder, words)
    return words


def language_share(query: str, vocabulary: Vocabulary | frozenset[str]) -> float:
    """The share of the query's content words that are words to the encoder (0 when it has no
    content word: numbers, punctuation or stopwords only). A query mostly in a script other
    than Latin counts as language (1.0): the English vocabulary cannot judge it."""
    vocabulary = vocabulary if isinstance(vocabulary, Vocabulary) else Vocabulary(frozenset(vocabulary))
    lowered = query.lower()
    letters = sum(1 for char in lowered if char.isalpha())
    if letters and len(_OTHER_SCRIPT.findall(lowered)) * 2 > letters:
        return 1.0
    content = [word for word in _LETTERS.findall(lowered) if word not in text.STOPWORDS]
    if not content:
        return 0.0
    return sum(1 for word in content if vocabulary.knows(word)) / len(content)


def reads_as_language(query: str, vocabulary: Vocabulary | frozenset[str]) -> bool:
    return bool(vocabulary) and language_share(query, vocabulary) >= LANGUAGE_MIN_SHARE


def has_words(query: str) -> bool:
    """Whether the query holds a word at all (two letters or more, any script): digits and
    punctuation alone ("12345 67890") are not text whose similarity means anything."""
    return bool(_LETTERS.search(query))


def dense_may_answer(max_similarity: float, lexical_hit: bool, language: bool, words: bool = True) -> bool:
    """Whether the dense side may rank tools for this query (see the module's docstring). `words`:
    whether the query has a word (`has_words`); without one, a high cosine opens nothing."""
    return lexical_hit or language or (words and max_similarity >= DENSE_ONLY_MIN_SIMILARITY)
