"""The `+required` term filter shared by the retrieval backends: the Claude Code rule, on its own index.

A tool passes a required term when the term is a substring of one of its name parts or a whole
word (JavaScript `\\b`) of its description or search hint (`names.matches_required_term`). That is
exactly "the Claude Code scorer gives this term points on this tool" (its +3 full-name rule never
fires for a term without a space), so the filter asks the indexed CC scorer
(`keyword.ClaudeCodeKeywordBackend`, proven equal to the plain transcription by the engine's tests)
instead of looping over every tool: a handful of posting lookups, whatever the catalog size. The CC
index is built on the first query that has a required term.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from playground.engine.search.base import QueryReading
from playground.engine.search.keyword import ClaudeCodeKeywordBackend, KeywordIndex
from playground.engine.search.names import matches_required_term, parse_tool_name
from playground.engine.tools import Tool, ToolCatalog


# A `+` before a number is a phone number's or a country code's, not a required-term marker:
# digits and the separators phone numbers are written with, then the sentence's punctuation
# ("+4915123577723", "+1-800-555-0199", "+1234567890,", "+1").
_NUMBER_TERM = re.compile(r"\d[\d().\-/]*[.,;:!?]*")


def number_term(term: str) -> bool:
    """Whether a `+term` (without its `+`) is a number rather than a word."""
    return bool(_NUMBER_TERM.fullmatch(term))


def numbers_as_words(reading: QueryReading) -> QueryReading:
    """`reading` with its `+number` terms read as ordinary (optional) terms, and a note saying so.

    Claude Code reads every `+term` as required, so "check if the phone number +4915123577723 is
    valid" keeps only tools whose text holds "4915123577723": none, an empty answer to a real
    request. A backend calls this only for a query that reads as natural language (a person does
    not mark a required term in a sentence with a phone number); `+word` stays required, and so
    does every `+term` of a keyword-style query.
    """
    numbers = tuple(term for term in reading.required if number_term(term))
    if not numbers:
        return reading
    note = (f"{', '.join('+' + n for n in numbers)} read as {'numbers' if len(numbers) > 1 else 'a number'} "
            "(a phone number or country code), not required terms: the query reads as natural language")
    return replace(
        reading,
        required=tuple(term for term in reading.required if not number_term(term)),
        optional=reading.optional + numbers,
        note="; ".join(part for part in (reading.note, note) if part),
    )


class RequiredTermFilter:
    """Which of a fixed tool list (a catalog's deferred tools, in order) pass every required term."""

    @classmethod
    def of(cls, catalog: ToolCatalog) -> RequiredTermFilter:
        """The filter of `catalog`'s deferred tools, one per catalog: every backend and index over the
        catalog (BM25, dense, hybrid, PostgreSQL, each tuned variant the inspector makes, an index read
        from its stored blob) shares it, so its keyword index is built once per catalog version, on the
        first query with a required term, not once per backend or index."""
        return catalog.kept(("required-term filter", cls), lambda: cls(catalog.deferred))

    def __init__(self, tools: Sequence[Tool]):
        self.tools = tuple(tools)
        self._index: KeywordIndex | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.tools)

    def _keyword_index(self) -> KeywordIndex:
        with self._lock:
            if self._index is None:
                # The tools are already a catalog's deferred tools, so they stay deferred here.
                self._index = ClaudeCodeKeywordBackend().build_index(ToolCatalog(self.tools))
            return self._index

    def mask(self, required: Sequence[str]) -> np.ndarray | None:
        """Boolean mask over the tools; None when there is no required term (everything passes)."""
        if not required:
            return None
        mask = np.ones(len(self.tools), dtype=bool)
        if not self.tools:
            return mask
        if any(not term or any(c.isspace() for c in term) for term in required):
            # Only a hand-built reading has such a term: apply the rule literally.
            for i, tool in enumerate(self.tools):
                parsed = parse_tool_name(tool.name)
                mask[i] = all(
                    matches_required_term(parsed, t, tool.description.lower(), tool.search_hint.lower()) for t in required
                )
            return mask
        index = self._keyword_index()
        for term in dict.fromkeys(required):
            # The CC scorer's points for this term, per tool (its own, tested index).
            mask &= ClaudeCodeKeywordBackend._term_points(index, term).total > 0
        return mask

