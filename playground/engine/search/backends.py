"""The search backends this project ships, by name → dotted path.

Django settings (`TOOLSEARCH_BACKENDS`) start from this mapping; the engine CLI uses it directly.
`DEFAULT_BACKEND` is what `--backend default` and new agent profiles use.
"""
from __future__ import annotations

import json
import re
from typing import Any

from playground.engine import safe_json
from playground.engine.search.base import SearchBackend, load_backend

BUILTIN_BACKENDS: dict[str, str] = {
    "claude-code": "playground.engine.search.keyword.ClaudeCodeKeywordBackend",
    # The same scorer transcribed plainly (no index): the reference and benchmark baseline.
    "naive": "playground.engine.search.naive.NaiveKeywordBackend",
    "bm25": "playground.engine.search.bm25.BM25Backend",
    "semantic": "playground.engine.search.semantic.SemanticBackend",  # needs the `semantic` extra
    "hybrid": "playground.engine.search.hybrid.HybridBackend",  # BM25 only (logged) without the extra
    # The same, each sentence's and clause's vector pooled from the request's one encoder pass:
    # natural-language requests in ~0.6× the time, about a point of recall less on multi-step ones.
    "hybrid-pooled": "playground.engine.search.hybrid.PooledHybridBackend",
    # Scale path: PostgreSQL full text (+ pgvector when installed); needs TOOLSEARCH_PG_DSN or a PostgreSQL DATABASE_URL.
    "postgres": "playground.engine.search.postgres.PostgresSearchBackend",
}
# The evaluation winner within the speed budget (docs/search-quality.md). Without the `semantic`
# extra it answers with BM25 alone and logs why, so a light install still works.
DEFAULT_BACKEND = "hybrid"
# The retrieval backends `bench` adds rows for unless told otherwise (hybrid-pooled beside hybrid:
# the speed the pooled reading buys).
BENCH_BACKENDS = ("bm25", "hybrid", "hybrid-pooled")


def get_backend(name: str, registry: dict[str, str] | None = None, default: str | None = None, **options: Any) -> SearchBackend:
    """Resolve "default", a registered name or a dotted path to a backend instance."""
    registry = registry or BUILTIN_BACKENDS
    if name in ("", "default"):
        name = default or DEFAULT_BACKEND
    return load_backend(name, registry, **options)


def parse_backend_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`hybrid` → ("hybrid", {}); `hybrid:aspect_weight=0:intent_weight=0.5` → the name and its
    options (values read as JSON, else kept as text). For side-by-side runs of one backend with
    different settings in `eval --backends` and `bench --search-backends`."""
    name, _, rest = spec.partition(":")
    # A ':' starts the next option only before `key=`: a JSON value may hold ':' itself.
    pairs = re.split(r":(?=\w+=)", rest) if rest else []
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"backend option {pair!r} in {spec!r} is not key=value")
        try:
            # NaN, 1e309, a huge integer: kept as text, which the backend's number check refuses.
            options[key.strip()] = safe_json.loads(value)
        except json.JSONDecodeError as exc:
            if value.lstrip()[:1] in ("{", "["):  # meant as JSON: say what is wrong with it
                raise ValueError(f"backend option {key.strip()}: {exc.msg} (column {exc.colno})") from None
            options[key.strip()] = value
    return name.strip(), options


def backend_from_spec(spec: str, registry: dict[str, str] | None = None, **options: Any) -> SearchBackend:
    """A backend from a spec (see `parse_backend_spec`); with options, its `name` is the spec so
    results of two settings of one backend stay apart. Unknown options are an error."""
    name, spec_options = parse_backend_spec(spec)
    backend = get_backend(name, registry, **{**options, **spec_options})
    known = type(backend).option_names
    unknown = sorted(set(spec_options) - known) if known is not None else []
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for backend {name!r} (options: {', '.join(sorted(known))})")
    if spec_options:
        backend.name = spec
    return backend
