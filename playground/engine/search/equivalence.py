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

import numpy as np

from playground.engine.search import stored, text
from playground.engine.tools import Tool, ToolCatalog

MIN_DESCRIPTION_WORDS = 4
MIN_SHARED_WORDS = 2
_SPACE = re.compile(r"\s+")
_WORD_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits, as `text.words` finds them


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


class _Keys:
    """`operation_key`, `description_key` and the content stems of `_descriptions_agree`, each
    piece of text split once per catalog."""

    def __init__(self) -> None:
        self._words: dict[str, list[str]] = {}
        self._short: dict[str, bool] = {}
        self._stems: dict[str, frozenset[str]] = {}

    def _split(self, identifier: str) -> list[str]:
        found = self._words.get(identifier)
        if found is None:
            found = self._words[identifier] = text.split_identifier(identifier)
        return found

    def operation(self, tool: Tool) -> str:
        server_words = set(self._split(tool.server or ""))
        return " ".join(w for w in self._split(text.tool_part(tool)) if w not in server_words)

    def description(self, tool: Tool) -> str:
        described = _SPACE.sub(" ", (tool.description or "").strip().lower())
        # Splitting identifiers only adds words, so four runs of letters and digits are enough
        # without it; fewer are counted the exact way.
        if len(_WORD_RUN.findall(described)) >= MIN_DESCRIPTION_WORDS:
            return described
        short = self._short.get(described)
        if short is None:
            short = self._short[described] = len(text.words(described)) < MIN_DESCRIPTION_WORDS
        return "" if short else described

    def stems_agree(self, a: Tool, b: Tool, skip: str) -> bool:
        first, second = self._content_stems(a) - {skip}, self._content_stems(b) - {skip}
        shared = len(first & second)
        return shared >= MIN_SHARED_WORDS and shared / max(1, len(first | second)) >= 0.2

    def _content_stems(self, tool: Tool) -> frozenset[str]:
        found = self._stems.get(tool.name)
        if found is None:
            found = self._stems[tool.name] = _content_stems(tool)
        return found


class SameOperation:
    """The catalog's groups of same-operation tools spanning at least two servers.

    Made once per catalog: each distinct server, tool part and description is split into words
    once, each tool's content stems are made when it is first compared, and two tools already in
    one group are not compared again (at 100,000 tools the pairwise checks were minutes). The groups
    do not depend on those shortcuts (tested against the plain rules)."""

    def __init__(self, tools: Iterable[Tool]):
        tools = list(tools)
        self._server = {t.name: t.server or "" for t in tools}
        self._group: dict[str, tuple[str, ...]] = {}
        parent = {t.name: t.name for t in tools}

        def find(name: str) -> str:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        def link(a: str, b: str) -> None:
            parent[find(a)] = find(b)

        keys = _Keys()
        by_description: dict[str, str] = {}
        by_operation: dict[str, list[Tool]] = {}
        for tool in tools:
            described = keys.description(tool)
            if described:
                if described in by_description:
                    link(tool.name, by_description[described])
                else:
                    by_description[described] = tool.name
            operation = keys.operation(tool)
            if not operation:
                continue
            earlier = by_operation.setdefault(operation, [])
            if " " in operation:
                if earlier:
                    link(tool.name, earlier[0].name)
            else:  # one word ("get", "search") says little alone: the descriptions must agree too
                skip = text.stem(operation)
                for other in earlier:
                    if find(tool.name) != find(other.name) and keys.stems_agree(tool, other, skip):
                        link(tool.name, other.name)
            earlier.append(tool)
        members: dict[str, list[str]] = {}
        for tool in tools:  # catalog order within a group
            members.setdefault(find(tool.name), []).append(tool.name)
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
            members = self.group(name) or None
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


def same_operation_for(catalog: ToolCatalog, store: stored.IndexStore | None = None) -> SameOperation:
    """`SameOperation` of the catalog's deferred tools, kept for the last few catalogs (by fingerprint).
    With `store`, groups stored by the background index build (`save_same_operation`) are read
    instead of made: a fresh process does not compare 100,000 tools' descriptions on its first search."""
    key = catalog.fingerprint
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    found = _stored_same_operation(catalog, store) if store is not None else None
    if found is None:
        found = SameOperation(catalog.deferred)
    with _cache_lock:
        _cache[key] = found
        while len(_cache) > 4:
            _cache.popitem(last=False)
    return found


class _StoredSameOperation(SameOperation):
    """Groups the background build stored (`save_same_operation`), read back as arrays of positions
    among the catalog's deferred tools: a name's group is looked up when asked (a result's few
    tools), not spread over dicts of the whole catalog on a fresh process's first search."""

    def __init__(self, deferred: Sequence[Tool], members: np.ndarray, ends: np.ndarray):  # nothing to make: no super()
        self._tools = deferred
        self._members = members
        self._ends = ends
        self._position: dict[str, int] | None = None
        self._group_of = np.full(len(deferred), -1, dtype=np.int32)
        self._group_of[members] = np.repeat(np.arange(len(ends), dtype=np.int32), np.diff(ends, prepend=0))

    def _names(self, group: int) -> tuple[str, ...]:
        start = int(self._ends[group - 1]) if group else 0
        return tuple(self._tools[n].name for n in self._members[start : int(self._ends[group])].tolist())

    def __len__(self) -> int:
        return len(self._members)

    def group(self, name: str) -> tuple[str, ...]:
        if self._position is None:
            self._position = {tool.name: n for n, tool in enumerate(self._tools)}
        position = self._position.get(name)
        if position is None or self._group_of[position] < 0:
            return ()
        return self._names(int(self._group_of[position]))

    def others(self, name: str) -> frozenset[str]:
        members = self.group(name)
        if not members:
            return frozenset()
        server = {n: self._tools[self._position[n]].server or "" for n in members}  # type: ignore[index]
        return frozenset(n for n in members if server[n] != server[name])

    def groups(self) -> list[tuple[str, ...]]:
        return [self._names(group) for group in range(len(self._ends))]


def stored_key(catalog: ToolCatalog) -> str:
    return f"same-operation|{stored.FORMAT}|{catalog.fingerprint}"


def save_same_operation(catalog: ToolCatalog, store: stored.IndexStore) -> str:
    """Store the catalog's groups (positions among its deferred tools), for `same_operation_for`; the key."""
    same = same_operation_for(catalog)
    position = {tool.name: n for n, tool in enumerate(catalog.deferred)}
    groups = same.groups()
    members = np.fromiter((position[name] for names in groups for name in names), dtype=np.int32)
    ends = np.cumsum([len(names) for names in groups], dtype=np.int64)
    key = stored_key(catalog)
    store.put(key, stored.pack({"members": members, "ends": ends}, {}, {"deferred": len(catalog.deferred)}))
    return key


def _stored_same_operation(catalog: ToolCatalog, store: stored.IndexStore) -> SameOperation | None:
    data = store.get(stored_key(catalog))
    if data is None:
        return None
    arrays, _, meta = stored.unpack(data)
    deferred = catalog.deferred
    if meta.get("deferred") != len(deferred):
        return None
    return _StoredSameOperation(deferred, arrays["members"], arrays["ends"])


def groups_in_results(catalog: ToolCatalog, matches: Sequence[str],
                      store: stored.IndexStore | None = None) -> list[SameOperationGroup]:
    """The same-operation groups that the ranked `matches` reach, in the order they first appear
    (`store`: where the background build stored the catalog's groups, see `same_operation_for`)."""
    same = same_operation_for(catalog, store)
    ranks = {name: rank for rank, name in enumerate(matches, start=1)}
    tool = catalog.get  # the few tools of the groups found, not a dict of the whole catalog
    out: list[SameOperationGroup] = []
    seen: set[tuple[str, ...]] = set()
    for name in matches:
        members = same.group(name)
        if not members or members in seen:
            continue
        seen.add(members)
        first = tool(members[0])
        operation = operation_key(first)
        if not operation or any(operation_key(tool(m)) != operation for m in members):
            operation = (first.description or "").strip()[:60]
        out.append(SameOperationGroup(
            operation=operation,
            servers=len({tool(m).server or "" for m in members}),
            members=tuple((m, tool(m).server or "", ranks.get(m)) for m in members),
        ))
    return out
