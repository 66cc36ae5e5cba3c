"""Per-tool embeddings, cached by content hash in memory and in a SQLite file.

The key is sha1(model id, the exact text embedded — `text.tool_document` of the tool, which reads
only its name, server, description, hint and schema): a tool whose content did not change is never
encoded again — not after a restart, not after an MCP sync that changed other tools. SQLite because it is in the standard library, safe for
several worker processes (WAL) and one file to delete. Location: TOOLSEARCH_CACHE_DIR, else
~/.cache/toolsearch-playground; TOOLSEARCH_CACHE_DIR=off keeps the cache in memory only.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
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


class EmbeddingCache:
    """key → float32 vector. Memory first, then SQLite; `put_many` writes both."""

    def __init__(self, path: Path | None, dim: int):
        self.path = path
        self.dim = dim
        self._memory: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
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
            if missing and self._db is not None:
                for start in range(0, len(missing), 500):
                    chunk = missing[start : start + 500]
                    rows = self._db.execute(
                        f"SELECT key, vector FROM embeddings WHERE key IN ({','.join('?' * len(chunk))})", chunk
                    ).fetchall()
                    for key, blob in rows:
                        vector = np.frombuffer(blob, dtype=np.float32)
                        if vector.shape == (self.dim,):
                            self._memory[key] = vector
                            found[key] = vector
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock:
            for key, vector in items.items():
                self._memory[key] = np.asarray(vector, dtype=np.float32)
            if self._db is not None and items:
                try:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)",
                        [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
                    )
                    self._db.commit()
                except sqlite3.Error as exc:
                    logger.warning("could not write embeddings to %s: %s", self.path, exc)

    def clear_memory(self) -> None:
        """Forget the in-memory layer (what a process restart does); the file stays."""
        with self._lock:
            self._memory.clear()


def embedding_key(model_id: str, document: str) -> str:
    return hashlib.sha1(f"{model_id}\x00{document}".encode("utf-8")).hexdigest()


def embed_tools(
    tools: Iterable[Tool],
    encode: Callable[[list[str]], np.ndarray],
    cache: EmbeddingCache,
    *,
    model_id: str,
    include_server: bool = True,
) -> tuple[np.ndarray, EmbedStats]:
    """The (n, dim) matrix of the tools' embeddings; only tools missing from the cache are encoded."""
    tools = list(tools)
    documents = [tool_document(t, include_server=include_server) for t in tools]
    keys = [embedding_key(model_id, d) for d in documents]
    found = cache.get_many(keys)
    todo = [i for i, key in enumerate(keys) if key not in found]
    stats = EmbedStats(reused=len(tools) - len(todo), encoded=len(todo))
    if todo:
        # Two tools with identical content share one key: encode each key once.
        unique: dict[str, int] = {}
        for i in todo:
            unique.setdefault(keys[i], i)
        vectors = encode([documents[i] for i in unique.values()])
        fresh = {key: vectors[n] for n, key in enumerate(unique)}
        cache.put_many(fresh)
        found.update(fresh)
    matrix = np.zeros((len(tools), cache.dim), dtype=np.float32)
    for i, key in enumerate(keys):
        matrix[i] = found[key]
    return matrix, stats


_shared_caches: dict[tuple[str, int], EmbeddingCache] = {}
_shared_lock = threading.Lock()


def shared_cache(dim: int) -> EmbeddingCache:
    """One cache per (file, dim) per process, so backends share the in-memory layer."""
    path = default_cache_path()
    key = (str(path), dim)
    with _shared_lock:
        cache = _shared_caches.get(key)
        if cache is None:
            cache = _shared_caches[key] = EmbeddingCache(path, dim)
        return cache
