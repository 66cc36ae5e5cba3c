"""Learning from usage: past ToolSearch queries that led to a tool being used.

When a model searches ("convert this pdf to text"), gets tools back and then calls one of them,
that query is evidence for that tool, in the words models actually use. The BM25 backends (and
the hybrid backend's BM25 side) index those queries as one more field of the tool, "usage", with
its own weight (`usage_weight`, 0 = off); the inspector shows its points like any other field.

- `usage_pairs(messages)` reads (query, tool) pairs from a conversation's history: a keyword
  ToolSearch query (or a query of Anthropic's server-side BM25 search tool), then a call of a tool
  that search returned. `select:` picks, exact names and `mcp__` prefixes are not evidence (the
  model already knew the name), nor are failed calls.
- `UsageLog` is what a backend reads: per tool, its most recent distinct queries (capped, so a
  popular tool's field does not grow without bound). It is immutable and has a fingerprint;
  backends key their index on (catalog, log), so a new log entry means a new index.

The log is data of this deployment, kept by the Django app (`conversations.ToolSearchUsage`); the
engine never keeps one in a global. The evaluation can stand in the development split's labelled
queries for a log (`eval --usage-from dev`) — figures that are then "learned from usage", reported
apart from the zero-shot ones.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from playground.engine.history import Message, blocks_of, client_style_matches, result_content
from playground.engine.search.query import js_trim, read_query
from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME

MAX_QUERIES_PER_TOOL = 25
# Anthropic's server-side BM25 search tool (its `query` is words; the regex variant's `pattern` is not).
SERVER_BM25_SEARCH = "tool_search_tool_bm25"


@dataclass(frozen=True)
class UsageLog:
    """Per tool name, the distinct past queries that led to it (oldest first, at most `limit`)."""

    queries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]], *, limit: int = MAX_QUERIES_PER_TOOL) -> UsageLog:
        """From (query, tool name) pairs, oldest first. A repeated query counts once (at its last
        use); each tool keeps its `limit` most recent queries."""
        if limit < 1:
            raise ValueError(f"a usage log keeps at least one query per tool, not {limit}")
        per_tool: dict[str, dict[str, None]] = {}
        for query, tool in pairs:
            query = " ".join(str(query).split())
            if not query or not tool:
                continue
            seen = per_tool.setdefault(tool, {})
            seen.pop(query, None)
            seen[query] = None
        return cls({tool: tuple(list(seen)[-limit:]) for tool, seen in per_tool.items()})

    def for_tool(self, name: str) -> tuple[str, ...]:
        return self.queries.get(name, ())

    def __bool__(self) -> bool:
        return any(self.queries.values())

    @property
    def tools(self) -> int:
        """How many tools have a past query."""
        return sum(1 for queries in self.queries.values() if queries)

    @property
    def entries(self) -> int:
        return sum(len(q) for q in self.queries.values())

    @cached_property  # every search keys its index on it: hash the log once
    def fingerprint(self) -> str:
        digest = hashlib.sha1()
        for tool in sorted(self.queries):
            digest.update(tool.encode())
            for query in self.queries[tool]:
                digest.update(b"\x00" + query.encode())
            digest.update(b"\x01")
        return digest.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {tool: list(queries) for tool, queries in self.queries.items()}


def is_usage_evidence(query: str) -> bool:
    """Only keyword queries teach anything: a `select:` pick or an `mcp__` prefix says the model
    already knew what it wanted. (A one-word query that is a tool's exact name is kept: it only
    repeats the name.)"""
    if read_query(query).kind != "keyword":
        return False
    return not js_trim(query).lower().startswith(MCP_PREFIX)


def usage_pairs(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(query, tool) for each tool called after a keyword ToolSearch returned it, in order; each
    pair once. A call that ended in an error is not counted."""
    queries: dict[str, str] = {}  # ToolSearch tool_use id → its query
    found_by: dict[str, str] = {}  # tool name → the latest evidence query that returned it
    calls: dict[str, tuple[str, str]] = {}  # tool_use id → (query, tool), until its result is seen
    pairs: dict[tuple[str, str], None] = {}
    for message in messages:
        role = message.get("role")
        for block in blocks_of(message):
            kind = block.get("type")
            if role == "assistant" and kind == "server_tool_use" and block.get("name") == SERVER_BM25_SEARCH:
                query = (block.get("input") or {}).get("query") if isinstance(block.get("input"), dict) else None
                if isinstance(query, str) and is_usage_evidence(query) and isinstance(block.get("id"), str):
                    queries[block["id"]] = query
            elif role == "assistant" and kind == "tool_search_tool_result" and block.get("tool_use_id") in queries:
                content = block.get("content")
                references = content.get("tool_references") if isinstance(content, dict) else None
                for reference in references or []:  # an error result has none
                    if isinstance(reference, dict) and isinstance(reference.get("tool_name"), str):
                        found_by[reference["tool_name"]] = queries[block["tool_use_id"]]
            elif role == "assistant" and kind == "tool_use" and isinstance(block.get("id"), str):
                name = block.get("name")
                if name == TOOL_SEARCH_NAME:
                    query = (block.get("input") or {}).get("query") if isinstance(block.get("input"), dict) else None
                    if isinstance(query, str) and is_usage_evidence(query):
                        queries[block["id"]] = query
                elif isinstance(name, str) and name in found_by:
                    calls[block["id"]] = (found_by[name], name)
            elif role == "user" and kind == "tool_result":
                use_id = block.get("tool_use_id")
                if use_id in queries and not block.get("is_error"):
                    for name in returned_names(block):
                        found_by[name] = queries[use_id]
                elif use_id in calls and not block.get("is_error"):
                    pairs.setdefault(calls.pop(use_id), None)
    return list(pairs)


def returned_names(result: dict[str, Any]) -> list[str]:
    """The tool names a ToolSearch result returned: its `tool_reference` blocks, or the names a
    client-side (text) result lists."""
    names: list[str] = []
    for block in result_content(result):
        if block.get("type") == "tool_reference" and isinstance(block.get("tool_name"), str):
            names.append(block["tool_name"])
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            names.extend(client_style_matches(block["text"]))
    return names
