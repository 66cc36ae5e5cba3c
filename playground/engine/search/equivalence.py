"""Same operation on other servers: tools a catalog offers more than once.

Catalogs that merge MCP servers often hold one operation several times (two filesystem servers'
`read_file`, three browser servers' `navigate`). A search that finds another server's copy of the
gold tool has served the model, yet strict evaluation counts it as a miss. Two tools on different
servers are taken to do the same operation when, detected from the catalog alone (no list of
names):
  - their tool parts are the same once the words of each one's server are dropped
    (`mcp__playwright__playwright_navigate` and `mcp__puppeteer__puppeteer_navigate` → "navigate";
    a single word left, like "get" or "search", groups only when the descriptions agree too), or
  - their descriptions are the same (case and spacing aside; at least MIN_DESCRIPTION_WORDS words,
    so that an empty or one-phrase description groups nothing).
Groups are closed under both rules (union-find). The evaluation reports recall counting these
beside the strict figure (`quality.score_query`), and the inspector groups them in its results.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from playground.engine.search import text
from playground.engine.tools import Tool, ToolCatalog

MIN_DESCRIPTION_WORDS = 4
MIN_SHARED_WORDS = 2
_SPACE = re.compile(r"\s+")


def operation_key(tool: Tool) -> str:
    """The tool part's words without the server's words ("" when nothing is left)."""
    server_words = set(text.split_identifier(tool.server or ""))
    return " ".join(w for w in text.split_identifier(text.tool_part(tool)) if w not in server_words)


def description_key(tool: Tool) -> str:
    """The description, lowercased with its spacing collapsed; "" when it is too short to tell."""
    described = _SPACE.sub(" ", (tool.description or "").strip().lower())
    return described if len(text.words(described)) >= MIN_DESCRIPTION_WORDS else ""


def _content_stems(tool: Tool) -> frozenset[str]:
    return frozenset(text.stem(w) for w in text.words(tool.description or "") if w not in text.STOPWORDS and len(w) > 2)


def _descriptions_agree(a: Tool, b: Tool, operation: str) -> bool:
    """Two descriptions share at least MIN_SHARED_WORDS content words besides the operation's own
    word and at least a fifth of their words (Jaccard), so "navigate" on two browser servers groups
    and a weather tool's `get` does not join a transcript tool's."""
    skip = {text.stem(operation)}
    first, second = _content_stems(a) - skip, _content_stems(b) - skip
    shared = len(first & second)
    return shared >= MIN_SHARED_WORDS and shared / max(1, len(first | second)) >= 0.2


class SameOperation:
    """The catalog's groups of same-operation tools spanning at least two servers."""

    def __init__(self, tools: Iterable[Tool]):
        tools = list(tools)
        self._server = {t.name: t.server or "" for t in tools}
        parent = {t.name: t.name for t in tools}

        def find(name: str) -> str:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        def link(a: str, b: str) -> None:
            parent[find(a)] = find(b)

        by_description: dict[str, str] = {}
        by_operation: dict[str, list[Tool]] = {}
        for tool in tools:
            described = description_key(tool)
            if described:
                if described in by_description:
                    link(tool.name, by_description[described])
                else:
                    by_description[described] = tool.name
            operation = operation_key(tool)
            if not operation:
                continue
            earlier = by_operation.setdefault(operation, [])
            if " " in operation:
                if earlier:
                    link(tool.name, earlier[0].name)
            else:  # one word ("get", "search") says little alone: the descriptions must agree too
                for other in earlier:
                    if _descriptions_agree(tool, other, operation):
                        link(tool.name, other.name)
            earlier.append(tool)
        members: dict[str, list[str]] = {}
        for tool in tools:  # catalog order within a group
            members.setdefault(find(tool.name), []).append(tool.name)
        self._group: dict[str, tuple[str, ...]] = {}
        for names in members.values():
            if len({self._server[n] for n in names}) > 1:
                for name in names:
                    self._group[name] = tuple(names)

    def __len__(self) -> int:
        """Tools that have a same-operation tool on another server."""
        return len(self._group)

    def group(self, name: str) -> tuple[str, ...]:
        """Every tool of `name`'s group, itself included, in catalog order; () if it has none."""
        return self._group.get(name, ())

    def others(self, name: str) -> frozenset[str]:
        """The tools of `name`'s group on another server than its own."""
        server = self._server.get(name)
        return frozenset(n for n in self._group.get(name, ()) if self._server[n] != server)

    def groups(self) -> list[tuple[str, ...]]:
        """Each group once, in catalog order of its first tool."""
        seen: dict[str, tuple[str, ...]] = {}
        for names in self._group.values():
            seen.setdefault(names[0], names)
        return list(seen.values())

    def collapse(self, ranked: Sequence[str]) -> list[tuple[str, list[str]]]:
        """`ranked` with each tool followed by the later-ranked tools of its group that it stands
        for: [(tool, [same operation on other servers, in rank order])], first of each group kept."""
        out: list[tuple[str, list[str]]] = []
        lead: dict[tuple[str, ...], int] = {}
        for name in ranked:
            members = self._group.get(name)
            if members is not None and members in lead:
                out[lead[members]][1].append(name)
                continue
            if members is not None:
                lead[members] = len(out)
            out.append((name, []))
        return out


@dataclass(frozen=True)
class SameOperationGroup:
    """A group of same-operation tools of which a search found at least one (the inspector)."""

    operation: str  # the shared tool part ("navigate"), else the start of the shared description
    servers: int
    members: tuple[tuple[str, str, int | None], ...]  # (tool, server, rank in the results or None)


_cache: OrderedDict[str, SameOperation] = OrderedDict()
_cache_lock = threading.Lock()


def same_operation_for(catalog: ToolCatalog) -> SameOperation:
    """`SameOperation` of the catalog's deferred tools, kept for the last few catalogs (by fingerprint)."""
    key = catalog.fingerprint
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    found = SameOperation(catalog.deferred)
    with _cache_lock:
        _cache[key] = found
        while len(_cache) > 4:
            _cache.popitem(last=False)
    return found


def groups_in_results(catalog: ToolCatalog, matches: Sequence[str]) -> list[SameOperationGroup]:
    """The same-operation groups that the ranked `matches` reach, in the order they first appear."""
    same = same_operation_for(catalog)
    ranks = {name: rank for rank, name in enumerate(matches, start=1)}
    tools = {t.name: t for t in catalog.deferred}
    out: list[SameOperationGroup] = []
    seen: set[tuple[str, ...]] = set()
    for name in matches:
        members = same.group(name)
        if not members or members in seen:
            continue
        seen.add(members)
        first = tools[members[0]]
        operation = operation_key(first)
        if not operation or any(operation_key(tools[m]) != operation for m in members):
            operation = (first.description or "").strip()[:60]
        out.append(SameOperationGroup(
            operation=operation,
            servers=len({tools[m].server or "" for m in members}),
            members=tuple((m, tools[m].server or "", ranks.get(m)) for m in members),
        ))
    return out
