"""Claude Code's keyword scoring, transcribed plainly: loop over tools, a regex per term per tool.

This is the reference the fast backend (`keyword.ClaudeCodeKeywordBackend`) must agree with exactly
(property-tested), and the baseline `bench` compares it with. It precomputes nothing.
"""
from __future__ import annotations

from typing import Any

from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution
from playground.engine.search.names import matches_required_term, parse_tool_name, whole_word_pattern
from playground.engine.tools import ToolCatalog

# Rule names and points, shared with the fast backend so both explain a score in the same words.
RULE_EXACT_PART = "exact name part"
RULE_PART_SUBSTRING = "substring of name part"
RULE_FULL_NAME = "full name contains term"
RULE_HINT_WORD = "whole word in search hint"
RULE_DESCRIPTION_WORD = "whole word in description"
POINTS_EXACT_PART = {True: 12, False: 10}  # keyed by "is an MCP tool"
POINTS_PART_SUBSTRING = {True: 6, False: 5}
POINTS_FULL_NAME = 3
POINTS_HINT_WORD = 4
POINTS_DESCRIPTION_WORD = 2


class NaiveKeywordBackend(SearchBackend):
    name = "naive"
    label = "Claude Code keyword (plain transcription)"
    description = "The Claude Code scorer as written: every tool, every term, a regex each time. For comparison."

    def build_index(self, catalog: ToolCatalog) -> Any:
        return None

    def rank(self, reading: QueryReading, index: Any, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        required = reading.required
        terms = reading.scoring_terms
        scored: list[ScoredTool] = []
        for tool in catalog.deferred:
            parsed = parse_tool_name(tool.name)
            description = tool.description.lower()
            hint = tool.search_hint.lower()
            if required and not all(matches_required_term(parsed, term, description, hint) for term in required):
                continue
            score = 0
            breakdown: list[TermContribution] = []
            for term in terms:
                pattern = whole_word_pattern(term)
                if term in parsed.parts:
                    points = POINTS_EXACT_PART[parsed.is_mcp]
                    breakdown.append(TermContribution(term, RULE_EXACT_PART, points, "name", term))
                    score += points
                else:
                    part = next((p for p in parsed.parts if term in p), None)
                    if part is not None:
                        points = POINTS_PART_SUBSTRING[parsed.is_mcp]
                        breakdown.append(TermContribution(term, RULE_PART_SUBSTRING, points, "name", part))
                        score += points
                if term in parsed.full and score == 0:
                    breakdown.append(TermContribution(term, RULE_FULL_NAME, POINTS_FULL_NAME, "name", parsed.full))
                    score += POINTS_FULL_NAME
                if hint and pattern.search(hint):
                    breakdown.append(TermContribution(term, RULE_HINT_WORD, POINTS_HINT_WORD, "search_hint"))
                    score += POINTS_HINT_WORD
                if pattern.search(description):
                    breakdown.append(TermContribution(term, RULE_DESCRIPTION_WORD, POINTS_DESCRIPTION_WORD, "description"))
                    score += POINTS_DESCRIPTION_WORD
            if score > 0:
                scored.append(ScoredTool(tool.name, score, breakdown))
        scored.sort(key=lambda s: -s.score)  # stable: ties keep catalog order
        return scored[:max_results]
