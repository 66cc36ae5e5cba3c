"""How a ToolSearch query is read, before any catalog lookup: `select:`, keyword terms (`+required`),
JavaScript's whitespace rules, and the limits of a query a person types.

Its own module so that what reads queries without searching (the usage log, usage.py) needs nothing
of the backends' contract (base.py).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

QueryKind = Literal["select", "exact", "prefix", "keyword", "empty"]
SELECT_PREFIX = "select:"

# JavaScript's `\s` (what Claude Code's `trim()` and `split(/\s+/)` use). Python's str.split()
# differs at the edges (it splits on \x1c-\x1f and \x85, and not on \ufeff).
JS_WHITESPACE = "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_WHITESPACE_RUN = re.compile("[" + JS_WHITESPACE + "]+")


# Limits of a query typed by a person (the inspector; `check_query_size`): a keyword query's length
# and terms bound the work of every backend (the naive one scores each term against each tool);
# a select: list only by its length, as a list of hundreds of names is a real use.
MAX_QUERY_CHARS = 2_000
MAX_QUERY_TERMS = 64
MAX_SELECT_CHARS = 200_000


def check_query_size(query: str) -> None:
    """Raise ValueError, with a message for people, for a query over the limits above."""
    stripped = js_trim(query)
    if stripped[: len(SELECT_PREFIX)].lower() == SELECT_PREFIX:
        if len(stripped) > MAX_SELECT_CHARS:
            raise ValueError(f"a select: list is limited to {MAX_SELECT_CHARS:,} characters (this one has {len(stripped):,})")
        return
    if len(stripped) > MAX_QUERY_CHARS:
        raise ValueError(f"a query is limited to {MAX_QUERY_CHARS:,} characters (this one has {len(stripped):,})")
    terms = len(split_terms(stripped))
    if terms > MAX_QUERY_TERMS:
        raise ValueError(f"a query is limited to {MAX_QUERY_TERMS} terms (this one has {terms})")


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def split_terms(text: str) -> list[str]:
    r"""`text.split(/\s+/).filter(Boolean)` in JavaScript."""
    return [t for t in _JS_WHITESPACE_RUN.split(text) if t]


@dataclass(frozen=True)
class QueryReading:
    """How a query was read. Shown to people in the inspector and the timeline."""

    raw: str
    kind: QueryKind
    selected_names: tuple[str, ...] = ()  # select: names in the order given, duplicates dropped
    prefix: str = ""  # mcp__ prefix query (lowercased)
    required: tuple[str, ...] = ()  # +terms, without the '+', lowercased
    optional: tuple[str, ...] = ()  # the other terms, lowercased
    note: str = ""  # e.g. "mcp__ prefix matched nothing; fell through to keyword scoring"

    @property
    def scoring_terms(self) -> tuple[str, ...]:
        return self.required + self.optional

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_query(query: str) -> QueryReading:
    """Read a ToolSearch query the way Claude Code does (before any catalog lookup).

    `select:A,B` (prefix case-insensitive, names exact) → select; otherwise terms split on whitespace,
    lowercased, `+term` required. Exact-name and `mcp__` prefix readings need the catalog and are
    decided in `SearchBackend.search`.
    """
    raw = query if isinstance(query, str) else str(query)
    stripped = js_trim(raw)
    if stripped[: len(SELECT_PREFIX)].lower() == SELECT_PREFIX:
        # dict.fromkeys drops duplicates keeping the first: linear in a long list.
        names = dict.fromkeys(name for name in (part.strip() for part in stripped[len(SELECT_PREFIX):].split(",")) if name)
        return QueryReading(raw=raw, kind="select", selected_names=tuple(names))
    lowered = stripped.lower()
    terms = split_terms(lowered)
    if not terms:
        return QueryReading(raw=raw, kind="empty")
    required = tuple(t[1:] for t in terms if t.startswith("+") and len(t) > 1)
    optional = tuple(t for t in terms if not (t.startswith("+") and len(t) > 1))
    return QueryReading(raw=raw, kind="keyword", required=required, optional=optional)
