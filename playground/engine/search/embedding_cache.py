"""Per-tool embeddings, cached by content hash in memory and in a SQLite file.

The key is sha1(model id, the exact text embedded — `text.tool_document` of the tool, which reads
only its name, server, description, hint and schema): a tool whose content did not change is never
encoded again — not after a restart, not after an MCP sync that changed other tools. SQLite because it is in the standard library, safe for
several worker processes (WAL) and one file to delete. Location: TOOLSEARCH_CACHE_DIR, else
~/.cache/toolsearch-playground; TOOLSEARCH_CACHE_DIR=off keeps the cache in memory only.

Where the vectors live is pluggable (`VectorStore`): the SQLite file (`SqliteVectorStore`, what the
CLI uses), nowhere but memory (`MemoryVectorStore`), or a store a caller hands in — the web app
passes one that keeps them in its database (`playground.registry.vectors`), so that every process
and every node loads a tool's vector instead of encoding it again.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from playground.engine.search.text import tool_document
from playground.engine.tools import Tool

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "TOOLSEARCH_CACHE_DIR"


def default_cache_path() -> Path | None:
    configured = os.environ.get(CACHE_DIR_ENV, "").strip()
    if configured.lower() in {"off", "none", "memory"}:
        return None
    base = Path(configured) if configured else Path.home() / ".cache" / "toolsearch-playground"
    return base / "embeddings.sqlite3"


@dataclass
class EmbedStats:
    reused: int = 0  # found in memory or on disk
    encoded: int = 0  # run through the encoder now


class VectorStore:
    """Where computed tool vectors are kept, by key (`embedding_key`). Subclasses implement
    `get_many` and `put_many`; they must be safe to call from several threads.

    A store only keeps what it is given: it never encodes. `EmbeddingCache` puts a process-wide
    memory layer in front of it."""

    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        """The stored vectors of those `keys` that have one of `dim` floats (others are absent)."""
        raise NotImplementedError

    def put_many(self, items: Mapping[str, np.ndarray], *, model_id: str = "") -> None:
        """Store (or replace) vectors; `model_id` names the encoder that made them."""
        raise NotImplementedError

    def missing_keys(self, keys: Sequence[str], dim: int) -> list[str]:
        """Those of `keys` with no stored vector (a store may answer without reading the vectors)."""
        found = self.get_many(keys, dim)
        return [key for key in keys if key not in found]


class MemoryVectorStore(VectorStore):
    """Vectors in this process only (tests; TOOLSEARCH_CACHE_DIR=off)."""

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        with self._lock:
            return {k: v for k in keys if (v := self._vectors.get(k)) is not None and v.shape == (dim,)}

    def put_many(self, items: Mapping[str, np.ndarray], *, model_id: str = "") -> None:
        with self._lock:
            self._vectors.update({k: np.asarray(v, dtype=np.float32) for k, v in items.items()})


class SqliteVectorStore(VectorStore):
    """A SQLite file: safe for several processes of one host (WAL), one file to delete."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            # A read-only home or a locked file must not break search: fall back to memory.
            logger.warning("embedding cache at %s unavailable (%s); caching in memory only", path, exc)
            self._db = None

    @property
    def available(self) -> bool:
        return self._db is not None

    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        if self._db is None:
            return found
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                rows = self._db.execute(
                    f"SELECT key, vector FROM embeddings WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (dim,):
                        found[key] = vector
        return found

    def put_many(self, items: Mapping[str, np.ndarray], *, model_id: str = "") -> None:
        if self._db is None or not items:
            return
        with self._lock:
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)",
                    [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
                )
                self._db.commit()
            except sqlite3.Error as exc:
                logger.warning("could not write embeddings to %s: %s", self.path, exc)


class EmbeddingCache:
    """key → float32 vector. Memory first, then the store (`VectorStore`); `put_many` writes both.

    `EmbeddingCache(path, dim)` keeps them in the SQLite file at `path` (None: memory only);
    `store=` hands in any other store."""

    def __init__(self, path: Path | None, dim: int, *, store: VectorStore | None = None):
        self.path = path
        self.dim = dim
        self._memory: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        if store is None and path is not None:
            sqlite_store = SqliteVectorStore(path)
            store = sqlite_store if sqlite_store.available else None
        self.store = store

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        with self._lock:
            for key in keys:
                vector = self._memory.get(key)
                if vector is None:
                    missing.append(key)
                else:
                    found[key] = vector
        if missing and self.store is not None:
            loaded = self.store.get_many(missing, self.dim)
            with self._lock:
                self._memory.update(loaded)
            found.update(loaded)
        return found

    def put_many(self, items: dict[str, np.ndarray], *, model_id: str = "") -> None:
        with self._lock:
            for key, vector in items.items():
                self._memory[key] = np.asarray(vector, dtype=np.float32)
        if self.store is not None and items:
            self.store.put_many(items, model_id=model_id)

    def missing(self, keys: Sequence[str]) -> list[str]:
        """Those of `keys` with a vector neither in memory nor in the store, found without reading
        the stored vectors (a catalog's 150 MB at 100,000 tools)."""
        with self._lock:
            absent = [key for key in keys if key not in self._memory]
        if absent and self.store is not None:
            return self.store.missing_keys(absent, self.dim)
        return absent

    def forget(self, keys: Iterable[str]) -> None:
        """Drop these keys from the memory layer when a store keeps them (an index that copied them
        into its matrix needs no second copy: 150 MB at 100,000 tools); without a store, keep them."""
        if self.store is None:
            return
        with self._lock:
            for key in keys:
                self._memory.pop(key, None)

    def clear_memory(self) -> None:
        """Forget the in-memory layer (what a process restart does); the store keeps its vectors."""
        with self._lock:
            self._memory.clear()


def embedding_key(model_id: str, document: str) -> str:
    return hashlib.sha1(f"{model_id}\x00{document}".encode("utf-8")).hexdigest()


MATRIX_CHUNK = 20_000  # vectors read from the store per step of `embed_tools`


def embed_tools(
    tools: Iterable[Tool],
    encode: Callable[[list[str]], np.ndarray],
    cache: EmbeddingCache,
    *,
    model_id: str,
    include_server: bool = True,
    keys: Sequence[str] | None = None,
    keep_in_memory: bool = True,
) -> tuple[np.ndarray, EmbedStats]:
    """The (n, dim) matrix of the tools' embeddings; only tools missing from the cache are encoded.
    `keys`: the tools' keys when the caller has them (`document_keys`); documents are then made
    only for the tools to encode (at 100,000 tools, making them all takes seconds).
    `keep_in_memory=False`: the matrix is the only copy kept in this process (the cache's store
    still has them), for an index that holds the matrix."""
    tools = list(tools)
    if keys is None:
        documents: dict[int, str] | list[str] = [tool_document(t, include_server=include_server) for t in tools]
        keys = [embedding_key(model_id, d) for d in documents]
    else:
        documents = {}
    matrix = np.zeros((len(tools), cache.dim), dtype=np.float32)
    todo: list[int] = []
    # The stored vectors go straight into the matrix, a chunk at a time: at 100,000 tools a dict of
    # every vector beside the matrix would be a second 150 MB.
    for start in range(0, len(keys), MATRIX_CHUNK):
        chunk = keys[start : start + MATRIX_CHUNK]
        found = cache.get_many(chunk)
        for offset, key in enumerate(chunk):
            vector = found.get(key)
            if vector is None:
                todo.append(start + offset)
            else:
                matrix[start + offset] = vector
        del found
        if not keep_in_memory:
            cache.forget(chunk)
    stats = EmbedStats(reused=len(tools) - len(todo), encoded=len(todo))
    if todo:
        # Two tools with identical content share one key: encode each key once.
        unique: dict[str, int] = {}
        for i in todo:
            unique.setdefault(keys[i], i)
        if isinstance(documents, dict):
            documents = {i: tool_document(tools[i], include_server=include_server) for i in unique.values()}
        vectors = encode([documents[i] for i in unique.values()])
        fresh = {key: vectors[n] for n, key in enumerate(unique)}
        cache.put_many(fresh, model_id=model_id)
        for i in todo:
            matrix[i] = fresh[keys[i]]
        if not keep_in_memory:
            cache.forget(fresh)
    return matrix, stats


_shared_caches: dict[tuple[str, int], EmbeddingCache] = {}
_shared_lock = threading.Lock()


def shared_cache(dim: int, store: VectorStore | None = None) -> EmbeddingCache:
    """One cache per (store, dim) per process, so backends share the in-memory layer. Without a
    store: the SQLite file of `default_cache_path()` (memory only when that is off)."""
    path = default_cache_path() if store is None else None
    key = (str(path) if store is None else f"store:{id(store)}", dim)
    with _shared_lock:
        cache = _shared_caches.get(key)
        if cache is None:
            cache = _shared_caches[key] = EmbeddingCache(path, dim, store=store)
        return cache


def document_keys(tools: Iterable[Tool], model_id: str, *, include_server: bool) -> list[str]:
    """The cache keys of these tools' documents (what `embed_tools` looks up)."""
    return [embedding_key(model_id, tool_document(t, include_server=include_server)) for t in tools]
