"""A backend that never encodes a whole catalog while answering a search.

`IndexedOrFallback(backend, fallback)` wraps a backend with a dense side (`semantic`, `hybrid`):
  - when the catalog's tool vectors are at hand (in memory, or all in the vector store, which a
    background build fills), or when only a few are missing (`inline_limit`: one edited tool is
    encoded in the request, in well under a second), the backend answers as usual;
  - otherwise it does not encode: it answers from the last catalog it searched with complete
    vectors (tools added since are not found yet; tools removed since are left out), or, when this
    process has none, with `fallback` (the keyword backend) — and says so on the result
    (`ToolSearchResult.notes`, `index_state`), which the inspector and the conversation show.
    `on_missing()` is called so that the caller can make sure a build is under way, and
    `describe_build()` says how far it is ("8,200 of 10,000 tools embedded").
The engine keeps the rule; the caller (the web app's adapter) hands in the store-backed backend,
the fallback and those two callables.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, ToolSearchResult, read_query
from playground.engine.search.semantic import SemanticBackend, dense_side
from playground.engine.tools import ToolCatalog

if TYPE_CHECKING:
    from playground.engine.search.usage import UsageLog

DEFAULT_INLINE_LIMIT = 64
# Extra results asked of the last complete index, so that enough remain once tools that left the
# catalog are dropped.
_PREVIOUS_SLACK = 20


class IndexedOrFallback(SearchBackend):
    def __init__(
        self,
        backend: SearchBackend,
        fallback: SearchBackend,
        *,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        on_missing: Callable[[], Any] | None = None,
        describe_build: Callable[[], str] | None = None,
    ) -> None:
        super().__init__()
        self.inner = backend
        self.fallback = fallback
        self.name, self.label, self.description = backend.name, backend.label, backend.description
        self.reads_usage = backend.reads_usage
        self.inline_limit = max(0, int(inline_limit))
        self.on_missing = on_missing
        self.describe_build = describe_build
        self._last_complete: ToolCatalog | None = None

    def __getattr__(self, name: str) -> Any:
        # Everything else (degraded_reason, options, bm25 ...) is the wrapped backend's.
        if name in ("inner", "__setstate__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def semantic(self) -> SemanticBackend | None:
        return dense_side(self.inner)

    def describe_query(self, query: str) -> list[str]:
        return self.inner.describe_query(query)

    def build_index(self, catalog: ToolCatalog, usage: UsageLog | None = None) -> Any:
        return self.inner.index_for(catalog, usage)

    def rank(self, reading: QueryReading, index: Any, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        return self.inner.rank(reading, index, catalog, max_results)

    # -- the rule ------------------------------------------------------------------------------------
    def missing_vectors(self, catalog: ToolCatalog) -> int:
        """How many of the catalog's deferred tools have no vector in memory or in the store, asked
        without reading the vectors (the index build that follows reads them once, into its matrix);
        none when a stored index holds them all (it is loaded then)."""
        dense = self.semantic
        if dense is None or dense.has_index(catalog) or dense.load_stored_vectors(catalog):
            return 0
        return len(set(dense.cache.missing(dense.tool_keys(catalog))))

    def search(
        self,
        query: str,
        catalog: ToolCatalog,
        *,
        max_results: int = 5,
        pending_mcp_servers: Sequence[str] = (),
        usage: UsageLog | None = None,
    ) -> ToolSearchResult:
        options = {"max_results": max_results, "pending_mcp_servers": pending_mcp_servers, "usage": usage}
        if read_query(query).kind != "keyword":  # select: and empty queries never rank
            return self.inner.search(query, catalog, **options)
        missing = self.missing_vectors(catalog)
        if missing <= self.inline_limit:
            result = self.inner.search(query, catalog, **options)
            self._last_complete = catalog
            return result
        if self.on_missing is not None:
            self.on_missing()
        result = self.fallback.search(query, catalog, **options)
        if result.reading.kind in ("exact", "prefix"):  # answered by name, as every backend does
            result.backend = self.name
            return result
        build = self.describe_build() if self.describe_build is not None else f"{missing:,} tools have no vector yet"
        previous = self._last_complete
        if previous is not None:
            self._answer_from_previous(result, query, previous, catalog, max_results, usage)
            known = {tool.name for tool in previous.deferred}
            added = sum(1 for tool in catalog.deferred if tool.name not in known)
            result.index_state = "previous"
            result.notes.append(
                f"{self.name}: answered from the last complete index ({len(previous.deferred):,} deferred tools"
                + (f"; {added:,} added since are not searched yet" if added > 0 else "")
                + f"); {build}."
            )
        else:
            result.index_state = "fallback"
            result.notes.append(f"{self.name}: answered by the {self.fallback.name} keyword backend while the index is built; {build}.")
        return result

    def _answer_from_previous(self, result: ToolSearchResult, query: str, previous: ToolCatalog, catalog: ToolCatalog,
                              max_results: int, usage: UsageLog | None) -> None:
        earlier = self.inner.search(query, previous, max_results=max_results + _PREVIOUS_SLACK, usage=usage)
        present = {tool.name for tool in catalog.deferred}
        result.backend = self.name
        result.scored = [s for s in earlier.scored if s.name in present][:max_results]
        result.matches = [s.name for s in result.scored]
        if result.matches:
            result.pending_mcp_servers = []
