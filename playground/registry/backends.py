"""The search backends this process keeps: one instance per backend name, a few tuned ones, and the
store their tool vectors live in.

Backends cache their index by catalog fingerprint, so keeping one instance per name lets every
request reuse the index the last one built. A backend with a dense side reads and writes the
configured vector store (`vectors.py`), and — when vectors are built in the background
(`indexing.py`, whose rows are `index_builds.py`) — is wrapped so that a search never encodes a
catalog in the request: a search that finds vectors missing queues the build through `index_builds`. Which
settings the inspector may type for a backend is `inspector_options.py`'s business.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from django.conf import settings

from playground.engine.search.backends import backend_from_spec
from playground.engine.search.base import SearchBackend
from playground.engine.search.embedding_cache import VectorStore
from playground.engine.search.indexed import IndexedOrFallback
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.semantic import dense_side, use_vector_store
from playground.engine.search.stored import IndexStore, use_index_store
from playground.registry import index_builds
from playground.registry.vectors import DatabaseIndexStore, make_store

_lock = threading.Lock()
_backends: dict[str, SearchBackend] = {}
# Backends with settings typed in the inspector: each holds its own indexes, so only the most
# recently used few are kept (the named backends and the configured default stay).
_tuned_backends: OrderedDict[str, SearchBackend] = OrderedDict()
TUNED_CACHE_SIZE = 6
_vector_stores: dict[str, VectorStore | None] = {}
_index_store: IndexStore | None = None
# What answers while a catalog's vectors are being built: Claude Code's own scorer (no index to wait for).
_keyword_fallback = ClaudeCodeKeywordBackend()


def backend_names() -> list[str]:
    return list(settings.TOOLSEARCH_BACKENDS)


def search_backend(name: str | None = None) -> SearchBackend:
    """One backend instance per name per process (backends cache their index by catalog fingerprint).
    A name may carry settings (`hybrid:piece_vectors="pooled"`, see `parse_backend_spec`), so a
    deployment can set TOOLSEARCH_DEFAULT_BACKEND to a tuned backend without new code."""
    resolved = name if name and name != "default" else settings.TOOLSEARCH_DEFAULT_BACKEND
    if ":" in resolved and resolved != settings.TOOLSEARCH_DEFAULT_BACKEND:
        # A profile's tuned backend: each edit makes a new spec, so these share the bounded cache.
        return tuned_search_backend(resolved)
    with _lock:
        backend = _backends.get(resolved)
    if backend is None:
        backend = _prepared(backend_from_spec(resolved, registry=dict(settings.TOOLSEARCH_BACKENDS)), resolved)
        with _lock:
            backend = _backends.setdefault(resolved, backend)
    return backend


def tuned_search_backend(spec: str) -> SearchBackend:
    """A backend for a spec with settings, from a bounded cache; bad options raise ValueError."""
    with _lock:
        backend = _tuned_backends.get(spec)
        if backend is not None:
            _tuned_backends.move_to_end(spec)
            return backend
    backend = make_backend(spec)
    with _lock:
        backend = _tuned_backends.setdefault(spec, backend)
        _tuned_backends.move_to_end(spec)
        while len(_tuned_backends) > TUNED_CACHE_SIZE:
            _tuned_backends.popitem(last=False)
    return backend


def make_backend(spec: str) -> SearchBackend:
    """A new backend for `spec`, not cached; a value of the wrong type raises ValueError naming the spec."""
    try:
        return _prepared(backend_from_spec(spec, registry=dict(settings.TOOLSEARCH_BACKENDS)), spec)
    except (TypeError, ValueError) as exc:  # a value of the wrong type: the option's own check names it
        raise ValueError(f"{spec}: {exc}") from exc


def vector_store() -> VectorStore | None:
    """This process's store of tool vectors (TOOLSEARCH_VECTOR_STORE; None: the engine's file)."""
    kind = settings.TOOLSEARCH_VECTOR_STORE
    with _lock:
        if kind not in _vector_stores:
            _vector_stores[kind] = make_store(kind)
        return _vector_stores[kind]


def index_store() -> IndexStore | None:
    """Where prebuilt search indexes are loaded from: the database, when vectors are built in the
    background (the same build stores the indexes); None (always build) otherwise."""
    global _index_store
    if not index_builds.builds_in_background():
        return None
    with _lock:
        if _index_store is None:
            _index_store = DatabaseIndexStore()
        return _index_store


def _prepared(backend: SearchBackend, spec: str) -> SearchBackend:
    """The backend with its dense side (if any) reading and writing the configured vector store,
    and — when vectors are built in the background — wrapped so that a search never encodes a
    catalog in the request (`IndexedOrFallback`: the last complete index or the keyword backend
    answers while the build runs, and the result says so)."""
    store = vector_store()
    if store is not None:
        use_vector_store(backend, store)
    use_index_store(backend, index_store())
    dense = dense_side(backend)
    if dense is None or not index_builds.builds_in_background():
        return backend
    build_spec = "" if spec == settings.TOOLSEARCH_DEFAULT_BACKEND else spec
    return IndexedOrFallback(
        backend,
        _keyword_fallback,
        inline_limit=settings.TOOLSEARCH_INLINE_EMBED_LIMIT,
        on_missing=lambda: index_builds.schedule_build(build_spec, dense.encoder.model_id),
        describe_build=index_builds.progress_note,
    )


def reset_caches() -> None:
    """Forget the kept backends (tests; a settings change)."""
    with _lock:
        _backends.clear()
        _tuned_backends.clear()
