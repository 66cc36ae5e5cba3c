"""The search backends this project ships, by name → dotted path.

Django settings (`TOOLSEARCH_BACKENDS`) start from this mapping; the engine CLI uses it directly.
`DEFAULT_BACKEND` is what `--backend default` and new agent profiles use.
"""
from __future__ import annotations

from typing import Any

from playground.engine.search.base import SearchBackend, load_backend

BUILTIN_BACKENDS: dict[str, str] = {
    "claude-code": "playground.engine.search.keyword.ClaudeCodeKeywordBackend",
    # The same scorer transcribed plainly (no index): the reference and benchmark baseline.
    "naive": "playground.engine.search.naive.NaiveKeywordBackend",
    "bm25": "playground.engine.search.bm25.BM25Backend",
    "semantic": "playground.engine.search.semantic.SemanticBackend",  # needs the `semantic` extra
    "hybrid": "playground.engine.search.hybrid.HybridBackend",  # BM25 only (logged) without the extra
    # Scale path: PostgreSQL full text (+ pgvector when installed); needs TOOLSEARCH_PG_DSN or a PostgreSQL DATABASE_URL.
    "postgres": "playground.engine.search.postgres.PostgresSearchBackend",
}
# The evaluation winner within the speed budget (README "Search quality"). Without the `semantic`
# extra it answers with BM25 alone and logs why, so a light install still works.
DEFAULT_BACKEND = "hybrid"


def get_backend(name: str, registry: dict[str, str] | None = None, default: str | None = None, **options: Any) -> SearchBackend:
    """Resolve "default", a registered name or a dotted path to a backend instance."""
    registry = registry or BUILTIN_BACKENDS
    if name in ("", "default"):
        name = default or DEFAULT_BACKEND
    return load_backend(name, registry, **options)
