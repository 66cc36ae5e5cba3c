"""Claude Code's tool-name parsing and its required-term rule, shared by every backend."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from playground.engine.tools import MCP_PREFIX

_CAMEL_BOUNDARY = re.compile(r"([a-z])([A-Z])")


@dataclass(frozen=True)
class ParsedName:
    parts: tuple[str, ...]  # lowercased name parts
    full: str  # the parts joined with spaces
    is_mcp: bool


@lru_cache(maxsize=200_000)
def parse_tool_name(name: str) -> ParsedName:
    """`mcp__github__create_issue` → (github, create, issue); `FileReadTool` → (file, read, tool).

    MCP names: strip `mcp__`, split on `__` then `_`. Others: split on CamelCase and `_`.
    """
    if name.startswith(MCP_PREFIX):
        rest = name[len(MCP_PREFIX):].lower()
        parts = tuple(p for chunk in rest.split("__") for p in chunk.split("_") if p)
        # As Claude Code builds it (not " ".join(parts)): `mcp__a___b` keeps its odd spacing.
        return ParsedName(parts=parts, full=rest.replace("__", " ").replace("_", " "), is_mcp=True)
    spaced = _CAMEL_BOUNDARY.sub(r"\1 \2", name).replace("_", " ").lower()
    parts = tuple(p for p in spaced.split() if p)
    return ParsedName(parts=parts, full=" ".join(parts), is_mcp=False)


@lru_cache(maxsize=4096)
def whole_word_pattern(term: str) -> re.Pattern[str]:
    """JavaScript's `\\b{term}\\b`: the term literal, ASCII word characters only (as in Claude Code)."""
    return re.compile(r"\b" + re.escape(term) + r"\b", re.ASCII)


def matches_required_term(parsed: ParsedName, term: str, description_lower: str, hint_lower: str) -> bool:
    """A required term must hit a name part (exactly or as a substring) or a whole word in the
    description or the search hint. `term`, `description_lower` and `hint_lower` are lowercased."""
    if any(term in part for part in parsed.parts):
        return True
    pattern = whole_word_pattern(term)
    if pattern.search(description_lower):
        return True
    return bool(hint_lower) and bool(pattern.search(hint_lower))
