"""The `+required` term filter shared by the retrieval backends (the Claude Code rule, vectorised)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from playground.engine.search.names import ParsedName, matches_required_term, parse_tool_name
from playground.engine.tools import Tool


class RequiredTermFilter:
    """Which of a fixed tool list pass every required term by `names.matches_required_term`.

    The rule only matches text that contains the term (a name-part substring or a whole word), so a
    plain substring test on a haystack of name parts + description + hint prunes first, and the exact
    rule runs only on the survivors.
    """

    def __init__(self, tools: Sequence[Tool]):
        self.parsed: list[ParsedName] = [parse_tool_name(t.name) for t in tools]
        self.descriptions: list[str] = [(t.description or "").lower() for t in tools]
        self.hints: list[str] = [(t.search_hint or "").lower() for t in tools]
        self.haystacks: list[str] = [" ".join((p.full, d, h)) for p, d, h in zip(self.parsed, self.descriptions, self.hints)]

    def __len__(self) -> int:
        return len(self.parsed)

    def mask(self, required: Sequence[str]) -> np.ndarray | None:
        """Boolean mask over the tools; None when there is no required term (everything passes)."""
        if not required:
            return None
        mask = np.zeros(len(self.parsed), dtype=bool)
        for i, haystack in enumerate(self.haystacks):
            if all(term in haystack for term in required) and all(
                matches_required_term(self.parsed[i], term, self.descriptions[i], self.hints[i]) for term in required
            ):
                mask[i] = True
        return mask
