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

import threading
from collections.abc import Sequence

import numpy as np

from playground.engine.search.keyword import ClaudeCodeKeywordBackend, KeywordIndex
from playground.engine.search.names import matches_required_term, parse_tool_name
from playground.engine.tools import Tool, ToolCatalog


class RequiredTermFilter:
    """Which of a fixed tool list (a catalog's deferred tools, in order) pass every required term."""

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

