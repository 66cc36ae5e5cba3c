"""Text analysis shared by the retrieval backends (BM25, semantic, hybrid) and the evaluation.

One analyser for documents and queries alike, so a term matches the same way on both sides:
identifiers are split (CamelCase, `_`, `__`, `-`, letter/digit boundaries), text is lowercased,
English stopwords are dropped and the rest is Snowball-stemmed (PyStemmer). `tool_fields` decides
what of a tool is searchable and under which field name; explanations name those fields.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

from playground.engine.tools import MCP_PREFIX, Tool

# NLTK's English list (via bm25s). Words a request is made of rather than what it asks for
# ("please", "want") are not here: they are generic, but whether dropping them helps is a
# measured question (see QUERY_FILLER and `keyword_query`).
STOPWORDS: frozenset[str] = frozenset(w.replace("'", "") for w in STOPWORDS_EN_PLUS)

# Request filler a user writes around the task in natural language. Used only to derive the
# keyword-style queries of the evaluation (a documented, deterministic rule).
QUERY_FILLER: frozenset[str] = frozenset(
    """please want wants need needs like would could help give show tell let lets get also using use
    make sure find know provide something anything able currently recently way ways thing things
    one ones someone much many well really going try trying whether""".split()
)

FIELDS: tuple[str, ...] = ("name", "server", "description", "search_hint", "schema")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

_stemmer = Stemmer.Stemmer("english")


def split_identifier(identifier: str) -> list[str]:
    """`getWeatherForecast_v2` → get weather forecast v 2; `mcp__git_hub__PRList` → mcp git hub pr list."""
    spaced = _CAMEL.sub(" ", identifier)
    spaced = _LETTER_DIGIT.sub(" ", spaced)
    return [w.lower() for w in _WORD.findall(spaced)]


def words(text: str) -> list[str]:
    """Lowercased words of free text; identifiers inside the text are split like names."""
    if not text:
        return []
    return split_identifier(text)


# How many words, and how many of them function words, make a query a natural-language request
# (a keyword-style query drops function words; `keyword_query` keeps at most 5 words).
NATURAL_MIN_WORDS = 6
NATURAL_MIN_STOPWORDS = 2


def natural_request(query: str) -> bool:
    """Whether `query` reads as a natural-language request (enough words, function words among
    them) rather than a few keywords."""
    found = words(query)
    return len(found) >= NATURAL_MIN_WORDS and sum(1 for word in found if word in STOPWORDS) >= NATURAL_MIN_STOPWORDS


@lru_cache(maxsize=100_000)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


def analyze(text: str) -> list[str]:
    """Words → stopwords dropped → stems. The analyser of every field and of queries."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


def analyze_terms(terms: Iterable[str]) -> list[tuple[str, list[str]]]:
    """Query terms (as the user typed them) → their stems, for per-term explanations."""
    return [(term, analyze(term)) for term in terms]


def tool_part(tool: Tool) -> str:
    """The tool part of a name: `mcp__github__create_issue` → `create_issue`; others unchanged."""
    if tool.name.startswith(MCP_PREFIX):
        rest = tool.name[len(MCP_PREFIX):]
        _, sep, tail = rest.partition("__")
        return tail if sep else rest
    return tool.name


def schema_text(schema: Mapping[str, Any], *, depth: int = 0) -> str:
    """Property names and descriptions of an input schema (one nested level of objects/arrays)."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return ""
    chunks: list[str] = []
    for key, spec in properties.items():
        chunks.append(str(key))
        if isinstance(spec, Mapping):
            description = spec.get("description")
            if isinstance(description, str):
                chunks.append(description)
            if depth < 1:
                nested = spec.get("items") if isinstance(spec.get("items"), Mapping) else spec
                chunks.append(schema_text(nested, depth=depth + 1))
    return " ".join(c for c in chunks if c)


def tool_fields(tool: Tool) -> dict[str, str]:
    """The searchable text of a tool, by field."""
    return {
        "name": tool_part(tool),
        "server": tool.server or "",
        "description": tool.description or "",
        "search_hint": tool.search_hint or "",
        "schema": schema_text(tool.input_schema),
    }


def tool_document(tool: Tool, *, include_server: bool = True, description_chars: int = 1000) -> str:
    """One readable passage for a sentence encoder: split name, server, description, hint, parameters.

    `include_server=False` when every tool shares one server: a name that is on every document
    tells the tools apart no more than a stopword does, and only dilutes the embedding."""
    name = " ".join(split_identifier(tool_part(tool)))
    parts = [name]
    if tool.server and include_server:
        parts.append(f"({' '.join(split_identifier(tool.server))})")
    text = " ".join(parts) + ": " + " ".join((tool.description or "").split())[:description_chars]
    if tool.search_hint:
        text += " " + tool.search_hint
    params = [" ".join(split_identifier(str(k))) for k in (tool.input_schema.get("properties") or {})]
    if params:
        text += " Parameters: " + ", ".join(params[:12])
    return text


def request_terms(text: str) -> list[str]:
    """The words a request is about, in order, each once: lowercase words (identifiers split),
    without stopwords, request filler and pure numbers ("What time is it in Tokyo?" → time, tokyo)."""
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOPWORDS or word in QUERY_FILLER or word.isdigit() or len(word) < 2:
            continue
        seen.setdefault(word, None)
    return list(seen)


def keyword_query(text: str, *, max_terms: int = 5) -> str:
    """The evaluation's keyword-style query, derived deterministically from a natural-language one.

    Rule: `request_terms` → keep the `max_terms` longest (ties: earlier first) → join them in their
    original order. Longer words are a catalog-independent proxy for salience.
    """
    terms = request_terms(text)
    ranked = sorted(range(len(terms)), key=lambda at: (-len(terms[at]), at))[:max_terms]
    return " ".join(terms[at] for at in sorted(ranked))
