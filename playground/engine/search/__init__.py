"""ToolSearch: query reading, result types and pluggable ranking backends."""
from playground.engine.search.base import (  # noqa: F401
    QueryReading,
    ScoredTool,
    SearchBackend,
    TermContribution,
    ToolSearchResult,
    load_backend,
    read_query,
)
