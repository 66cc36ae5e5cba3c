"""The ToolSearch contract shared by every backend.

`SearchBackend.search` is a template method: it reads the query once (`read_query`), answers the
special forms every backend must honour identically (`select:`, an exact tool name, an `mcp__`
prefix), and hands keyword queries to the backend's `rank`. Backends only rank; they never
re-implement the special forms. After ranking, a tool the query names (its name or the words of its
name, `mentions.py`) goes first, whichever backend ranked. Explanations (`ScoredTool.breakdown`) come from the same code
path that ranks: a backend fills them while it scores.
"""
from __future__ import annotations

import importlib
import logging
import math
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from playground.engine.memory import collector_paused, return_freed_memory
from playground.engine.search.query import QueryReading, js_trim, read_query
from playground.engine.search.mentions import MENTION_RULE, Mention, named_tools
from playground.engine.tools import MCP_PREFIX, ToolCatalog

if TYPE_CHECKING:
    from playground.engine.search.index_store import IndexStore
    from playground.engine.search.usage import UsageLog

logger = logging.getLogger(__name__)

# A catalog this large hands back the memory its index's making used.
LARGE_CATALOG = 10_000  # tools


def number_option(label: str, value: Any, low: float, high: float, *, integer: bool = False) -> float:
    """A backend's numeric option as a float (an int when `integer`), refused with a ValueError that
    names it when it is not finite (nan, inf, 1e309) or outside [low, high]: such a value would
    rank every tool as nan or make an index as large as it says."""
    number = float(value)  # a string that is no number: Python's own message ("could not convert…")
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"{label} must be a finite number from {low:g} to {high:g}, not {value!r}")
    if integer:
        if number != int(number):
            raise ValueError(f"{label} must be a whole number, not {value!r}")
        return int(number)
    return number


@dataclass(frozen=True)
class TermContribution:
    """One rule firing for one term on one tool: the unit of an explanation."""

    term: str
    rule: str  # e.g. "exact name part", "substring of name part", "whole word in description", "bm25 description"
    points: float
    field: str = ""  # where it matched: name / description / search_hint / schema / embedding ...
    detail: str = ""  # e.g. the matched name part, a similarity, a rank


@dataclass
class ScoredTool:
    name: str
    score: float
    breakdown: list[TermContribution] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "score": self.score, "breakdown": [asdict(c) for c in self.breakdown]}


@dataclass
class ToolSearchResult:
    """What one ToolSearch call found, and why."""

    query: str
    reading: QueryReading
    backend: str
    matches: list[str]  # tool names, best first; what gets loaded
    scored: list[ScoredTool] = field(default_factory=list)  # keyword queries: the ranked tools with breakdowns
    total_deferred_tools: int = 0
    pending_mcp_servers: list[str] = field(default_factory=list)
    already_loaded: list[str] = field(default_factory=list)  # matches that were not deferred (harmless no-ops)
    not_found: list[str] = field(default_factory=list)  # select: names that exist nowhere
    # How the answer differs from the backend's usual one, for people (the inspector, the
    # conversation): e.g. its index is being built and another index or backend answered.
    notes: list[str] = field(default_factory=list)
    index_state: str = ""  # "" (the backend's own index), "previous" (an older catalog's) or "fallback"

    def to_output(self) -> dict[str, Any]:
        """The ToolSearch tool's output object: {matches, query, total_deferred_tools, pending_mcp_servers?}."""
        output: dict[str, Any] = {
            "matches": list(self.matches),
            "query": self.query,
            "total_deferred_tools": self.total_deferred_tools,
        }
        if self.pending_mcp_servers:
            output["pending_mcp_servers"] = list(self.pending_mcp_servers)
        return output

    def to_dict(self) -> dict[str, Any]:
        """Everything, for events and the inspector."""
        return {
            **self.to_output(),
            "backend": self.backend,
            "reading": self.reading.to_dict(),
            "scored": [s.to_dict() for s in self.scored],
            "already_loaded": list(self.already_loaded),
            "not_found": list(self.not_found),
            **({"notes": list(self.notes), "index_state": self.index_state} if self.notes or self.index_state else {}),
        }


class SearchBackend(ABC):
    """Base class of ToolSearch ranking backends, picked by dotted path in settings.

    Subclasses implement `build_index` (called once per catalog fingerprint; precompute here) and
    `rank` (called for keyword queries only). They must:
      - rank only `catalog.deferred` tools;
      - keep only tools that match every required term (`reading.required`) by the Claude Code rule
        (see `playground.engine.search.names.matches_required_term`);
      - return at most `max_results` tools with score > 0, best first, ties in catalog order;
      - fill each ScoredTool's breakdown while scoring (never a second implementation).
    Instances are cheap, reusable and thread-safe for `search` after construction.
    """

    name: str = "base"
    label: str = "Base"
    description: str = ""
    # The keyword options the constructor reads; None = not declared (nothing is checked). A
    # backend spec on the CLI (`hybrid:aspect_weight=0`) is checked against it, so a typo fails.
    option_names: frozenset[str] | None = None
    # Whether `build_index` reads a `UsageLog` (past queries that led to each tool, usage.py). The
    # others ignore it, and their index stays keyed on the catalog alone.
    reads_usage: bool = False
    _index_cache_size = 4
    # Where prebuilt indexes are loaded from (`stored.use_index_store`); None: always build.
    index_store: IndexStore | None = None

    def __init__(self, **options: Any) -> None:
        self.options = options
        self._indexes: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.RLock()

    # -- the template ------------------------------------------------------------------------
    def search(
        self,
        query: str,
        catalog: ToolCatalog,
        *,
        max_results: int = 5,
        pending_mcp_servers: Sequence[str] = (),
        usage: UsageLog | None = None,
    ) -> ToolSearchResult:
        max_results = max(1, int(max_results))
        reading = read_query(query)
        result = ToolSearchResult(
            query=query,
            reading=reading,
            backend=self.name,
            matches=[],
            total_deferred_tools=len(catalog.deferred),
        )
        if reading.kind == "select":
            self._answer_select(reading, catalog, result)
        elif reading.kind == "keyword":
            lowered = js_trim(query).lower()
            exact = catalog.get_deferred_case_insensitive(lowered) or catalog.get_case_insensitive(lowered)
            if exact is not None:
                result.reading = _replace(reading, kind="exact")
                result.matches = [exact.name]
                if not catalog.is_deferred(exact.name):
                    result.already_loaded = [exact.name]
            else:
                prefix_hits: list[str] = []
                if lowered.startswith(MCP_PREFIX) and len(lowered) > len(MCP_PREFIX):
                    prefix_hits = [t.name for t in catalog.deferred if t.name.lower().startswith(lowered)][:max_results]
                if prefix_hits:
                    result.reading = _replace(reading, kind="prefix", prefix=lowered)
                    result.matches = prefix_hits
                else:
                    if lowered.startswith(MCP_PREFIX) and len(lowered) > len(MCP_PREFIX):
                        result.reading = _replace(
                            reading, note="mcp__ prefix matched no deferred tool; fell through to keyword scoring"
                        )
                    result.reading = self.refine_reading(result.reading)
                    scored = self.rank(result.reading, self.index_for(catalog, usage), catalog, max_results)
                    scored = promote_named(scored, named_tools(query, catalog, result.reading.required))
                    result.scored = scored[:max_results]
                    result.matches = [s.name for s in result.scored]
        if not result.matches:
            result.pending_mcp_servers = list(pending_mcp_servers)
        return result

    def refine_reading(self, reading: QueryReading) -> QueryReading:
        """The keyword reading this backend ranks (and the inspector shows), after the Claude Code
        reading. Default: unchanged — `+term` is required exactly as Claude Code reads it."""
        return reading

    def describe_query(self, query: str) -> list[str]:
        """How this backend reads a keyword query beyond its terms, for people (the inspector):
        e.g. the sentences and clauses the hybrid backend scores on their own. Default: nothing."""
        return []

    def _answer_select(self, reading: QueryReading, catalog: ToolCatalog, result: ToolSearchResult) -> None:
        for name in reading.selected_names:
            tool = catalog.get(name)
            if tool is None:
                result.not_found.append(name)
                continue
            result.matches.append(tool.name)
            if not catalog.is_deferred(tool.name):
                result.already_loaded.append(tool.name)

    # -- what backends provide --------------------------------------------------------------------
    def has_index(self, catalog: ToolCatalog) -> bool:
        """Whether this backend already holds its index of `catalog` (without usage) in memory."""
        with self._lock:
            return catalog.fingerprint in self._indexes

    def index_for(self, catalog: ToolCatalog, usage: UsageLog | None = None) -> Any:
        learned = usage if self.reads_usage and usage else None
        key = catalog.fingerprint if learned is None else f"{catalog.fingerprint}:{learned.fingerprint}"
        with self._lock:  # one backend may serve several threads (ASGI, thread pools)
            index = self._indexes.get(key)
            if index is None:
                index = self._load_stored(catalog) if learned is None else None
                if index is None:
                    index = self.build_index(catalog) if learned is None else self.build_index(catalog, usage=learned)
                if len(catalog) >= LARGE_CATALOG:
                    # Loading or building it allocated several times what it keeps (rows, buffers):
                    # give that back, or the process stays at its peak (150 MB at 100,000 tools).
                    return_freed_memory(collect=False)
                self._indexes[key] = index
                while len(self._indexes) > self._index_cache_size:
                    self._indexes.popitem(last=False)
            else:
                self._indexes.move_to_end(key)
            return index

    # -- prebuilt indexes (stored.py) ------------------------------------------------------------
    def stored_index_key(self, catalog: ToolCatalog) -> str | None:
        """The key this backend's index of `catalog` is stored under; None: it is never stored.
        It must change with anything the index depends on (the catalog's fingerprint, settings)."""
        return None

    def dump_index(self, index: Any) -> bytes:
        raise NotImplementedError

    def stored_index_data(self, catalog: ToolCatalog) -> bytes:
        """What is stored for `catalog`: its index (built or reused), dumped."""
        return self.dump_index(self.index_for(catalog))

    def load_index(self, data: bytes, catalog: ToolCatalog) -> Any:
        """The index `dump_index` stored, for `catalog` (the catalog it was built from)."""
        raise NotImplementedError

    def _load_stored(self, catalog: ToolCatalog) -> Any:
        store = self.index_store
        if store is None:
            return None
        key = self.stored_index_key(catalog)
        if key is None:
            return None
        try:
            data = store.get(key)
            if data is None:
                return None
            with collector_paused():  # arrays, strings and dicts: no cycles
                return self.load_index(data, catalog)
        except Exception:
            logger.exception("%s: could not load the stored index %s; building it", self.name, key)
            return None

    @abstractmethod
    def build_index(self, catalog: ToolCatalog) -> Any:
        """Precompute what ranking needs for this catalog's deferred tools. A backend with
        `reads_usage` also takes `usage=` (a non-empty UsageLog)."""

    @abstractmethod
    def rank(self, reading: QueryReading, index: Any, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        """Rank deferred tools for a keyword reading; see the class docstring for the rules."""


def promote_named(scored: list[ScoredTool], mentions: Sequence[Mention]) -> list[ScoredTool]:
    """`scored` with the tools the query names first: the surest mention first, then as the backend
    ranked them. Each gets the points that lift it above the backend's top, with the rule that gave
    them in its breakdown, so the explanation still adds up to the score."""
    if not mentions:
        return scored
    position = {s.name: i for i, s in enumerate(scored)}
    ordered = sorted(mentions, key=lambda m: (-m.words, position.get(m.name, len(scored))))
    by_name = {s.name: s for s in scored}
    top = max((s.score for s in scored), default=0.0)
    promoted: list[ScoredTool] = []
    for rank, mention in enumerate(ordered):
        own = by_name.get(mention.name)
        before = own.score if own is not None else 0.0
        total = top + len(ordered) - rank
        mentioned = TermContribution(term=mention.form, rule=MENTION_RULE, points=total - before, field="name",
                                     detail=f"the request names {mention.name}")
        promoted.append(ScoredTool(mention.name, total, [*(own.breakdown if own is not None else []), mentioned]))
    named = {m.name for m in ordered}
    return promoted + [s for s in scored if s.name not in named]


def load_backend(path_or_name: str, registry: Mapping[str, str] | None = None, **options: Any) -> SearchBackend:
    """Instantiate a backend by registry name (e.g. "claude-code") or dotted path."""
    return backend_class(path_or_name, registry)(**options)


def backend_class(path_or_name: str, registry: Mapping[str, str] | None = None) -> type[SearchBackend]:
    """The backend class a registry name or dotted path names (its `option_names` without making one)."""
    path = (registry or {}).get(path_or_name, path_or_name)
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        known = ", ".join(sorted(registry or {})) or "none"
        raise ValueError(f"unknown search backend {path_or_name!r} (known: {known})")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load search backend {path_or_name!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, SearchBackend)):
        raise ValueError(f"{path!r} is not a SearchBackend subclass")
    return cls


def _replace(reading: QueryReading, **changes: Any) -> QueryReading:
    from dataclasses import replace

    return replace(reading, **changes)
