"""Where search failed, read from a conversation's history: the other side of learning from usage.

`usage.usage_pairs` keeps the searches that worked (a keyword search returned a tool, then the
model called it). This module keeps the ones that did not:

- **empty**: a keyword search returned no tool at all;
- **missed**: a keyword search returned tools, but the next tool the model called successfully was
  not among them (it found that tool by another search or loaded it by `select:`).

The tool a search was *for* is the next tool called successfully after it — the same reading as
usage evidence, so a row's "query → tool" pair is exactly the labelled query it would make. Only
tools the caller says are searchable (the profile's deferred tools) count: a search followed by a
call of an always-loaded tool says nothing about the search's ranking.

Like `usage_pairs`, this reads the engine's messages (client-side `ToolSearch` results with
`tool_reference` blocks or text, and Anthropic's server-side BM25 search), so it needs no database.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from playground.engine.history import Message, blocks_of
from playground.engine.search.base import read_query
from playground.engine.search.usage import SERVER_BM25_SEARCH, is_usage_evidence, returned_names
from playground.engine.tools import TOOL_SEARCH_NAME

EMPTY = "empty"
MISSED = "missed"


@dataclass(frozen=True)
class SearchMiss:
    query: str
    kind: str  # EMPTY | MISSED
    tool: str = ""  # the next tool called successfully after the search ("" when none was)
    returned: tuple[str, ...] = ()  # what the search returned, in its order
    loaded_by: str = ""  # how `tool` was loaded after the miss: "select" | "search" | "" (unknown)


@dataclass
class _Search:
    query: str
    returned: list[str] = field(default_factory=list)
    answered: bool = False  # its result was read (an error result is dropped instead)
    selected_after: set[str] = field(default_factory=set)  # `select:` picks made after it
    found_after: set[str] = field(default_factory=set)  # names later searches returned


def search_misses(messages: Sequence[Message], searchable: Collection[str]) -> list[SearchMiss]:
    """The failed keyword searches of one conversation, in order (see the module's docstring)."""
    searches: dict[str, _Search] = {}  # ToolSearch / server search tool_use id → the search
    selects: dict[str, list[str]] = {}  # select: tool_use id → the names it asked for
    pending: list[_Search] = []  # answered searches not yet followed by a successful call
    calls: dict[str, str] = {}  # tool_use id → tool name, until its result is seen
    misses: list[SearchMiss] = []

    def close(tool: str) -> None:
        for search in pending:
            if tool in search.returned:
                continue
            loaded_by = "select" if tool in search.selected_after else "search" if tool in search.found_after else ""
            kind = MISSED if search.returned else EMPTY
            misses.append(SearchMiss(search.query, kind, tool, tuple(search.returned), loaded_by))
        pending.clear()

    def flush_unanswered() -> None:
        # A new request from the user: what nothing was called after says nothing, unless it was empty.
        misses.extend(SearchMiss(s.query, EMPTY) for s in pending if not s.returned)
        pending.clear()

    def answer(search: _Search, names: list[str]) -> None:
        search.returned = list(dict.fromkeys(names))
        search.answered = True
        for earlier in pending:
            earlier.found_after.update(search.returned)
        pending.append(search)

    for message in messages:
        role = message.get("role")
        blocks = blocks_of(message)
        if role == "user" and any(block.get("type") == "text" for block in blocks) and \
                not any(block.get("type") == "tool_result" for block in blocks):
            flush_unanswered()
        for block in blocks:
            kind = block.get("type")
            block_id = block.get("id")
            if role == "assistant" and kind in ("tool_use", "server_tool_use") and isinstance(block_id, str):
                name = block.get("name")
                if (query := _search_query(block)) is not None:
                    if is_usage_evidence(query):
                        searches[block_id] = _Search(query=" ".join(query.split()))
                    elif name == TOOL_SEARCH_NAME and (reading := read_query(query)).kind == "select":
                        selects[block_id] = list(reading.selected_names)
                elif kind == "tool_use" and isinstance(name, str) and name != TOOL_SEARCH_NAME:
                    calls[block_id] = name
            elif role == "assistant" and kind == "tool_search_tool_result" and block.get("tool_use_id") in searches:
                content = block.get("content")
                references = content.get("tool_references") if isinstance(content, dict) else None
                if references is not None:  # an error result has none
                    answer(searches.pop(block["tool_use_id"]),
                           [r["tool_name"] for r in references if isinstance(r, dict) and isinstance(r.get("tool_name"), str)])
            elif role == "user" and kind == "tool_result":
                use_id = block.get("tool_use_id")
                if use_id in searches:
                    search = searches.pop(use_id)
                    if not block.get("is_error"):
                        answer(search, returned_names(block))
                elif use_id in selects:
                    picked = selects.pop(use_id)
                    if not block.get("is_error"):
                        for search in pending:
                            search.selected_after.update(picked)
                elif use_id in calls:
                    tool = calls.pop(use_id)
                    if not block.get("is_error") and tool in searchable:
                        close(tool)
    flush_unanswered()
    return misses


def keyword_searches(messages: Sequence[Message]) -> int:
    """How many keyword searches (usage evidence) a history holds: the denominator of a miss rate."""
    return sum(1 for message in messages if message.get("role") == "assistant" for block in blocks_of(message)
               if (query := _search_query(block)) is not None and is_usage_evidence(query))


def _search_query(block: dict) -> str | None:
    """The query of a search call (ToolSearch, or Anthropic's server-side BM25 search); None for any other block."""
    if block.get("type") not in ("tool_use", "server_tool_use") or block.get("name") not in (TOOL_SEARCH_NAME, SERVER_BM25_SEARCH):
        return None
    query = block["input"].get("query") if isinstance(block.get("input"), dict) else None
    return query if isinstance(query, str) else None
