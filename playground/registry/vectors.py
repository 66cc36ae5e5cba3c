"""Tool vectors in the database (`ToolEmbedding`): the engine's `VectorStore` for the web app.

Every web process, worker and node reads the same rows, so a catalog is encoded once (by the
background build, `tasks.build_search_index`) rather than once per process per host. Chosen by
TOOLSEARCH_VECTOR_STORE (`database`, the default; `file`: the engine's SQLite file of this host;
`memory`: this process only) and handed to backends by `backends.search_backend`.

Prebuilt indexes (`StoredSearchIndex`, the engine's `IndexStore`) live here too: the background
build stores them, every process loads them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import psycopg
from django.db import connection

from playground.engine.search.embedding_cache import MemoryVectorStore, SqliteVectorStore, VectorStore, default_cache_path
from playground.engine.search.stored import IndexStore
from playground.registry.models import StoredSearchIndex, ToolEmbedding

# Keys per query: under SQLite's 999 variables, and few round trips for 100,000 tools.
CHUNK = 900
PG_CHUNK = 20_000  # PostgreSQL: keys per array parameter


class DatabaseVectorStore(VectorStore):
    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        if connection.vendor == "postgresql":
            # One array parameter per 20,000 keys and no model layer: 100,000 vectors are one
            # buffer, viewed row by row (no copy per vector).
            table = connection.ops.quote_name(ToolEmbedding._meta.db_table)
            with connection.cursor() as cursor:
                for start in range(0, len(keys), PG_CHUNK):
                    cursor.execute(f"SELECT key, vector FROM {table} WHERE dim = %s AND key = ANY(%s)",
                                   [dim, list(keys[start : start + PG_CHUNK])])
                    rows = cursor.fetchall()
                    if not rows:
                        continue
                    blobs = [bytes(blob) for _, blob in rows]
                    if any(len(blob) != dim * 4 for blob in blobs):
                        rows = [row for row, blob in zip(rows, blobs) if len(blob) == dim * 4]
                        blobs = [blob for blob in blobs if len(blob) == dim * 4]
                    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
                    found.update(zip((key for key, _ in rows), matrix))
            return found
        for start in range(0, len(keys), CHUNK):
            rows = ToolEmbedding.objects.filter(key__in=list(keys[start : start + CHUNK]), dim=dim).values_list("key", "vector")
            for key, blob in rows:
                vector = np.frombuffer(bytes(blob), dtype="<f4")
                if vector.shape == (dim,):
                    found[key] = vector
        return found

    def missing_keys(self, keys: Sequence[str], dim: int) -> list[str]:
        present: set[str] = set()
        if connection.vendor == "postgresql":  # keys only, one array parameter per 20,000 keys
            table = connection.ops.quote_name(ToolEmbedding._meta.db_table)
            with connection.cursor() as cursor:
                for start in range(0, len(keys), PG_CHUNK):
                    cursor.execute(f"SELECT key FROM {table} WHERE dim = %s AND key = ANY(%s)",
                                   [dim, list(keys[start : start + PG_CHUNK])])
                    present.update(key for (key,) in cursor.fetchall())
            return [key for key in keys if key not in present]
        for start in range(0, len(keys), CHUNK):
            present.update(ToolEmbedding.objects.filter(key__in=list(keys[start : start + CHUNK]), dim=dim).values_list("key", flat=True))
        return [key for key in keys if key not in present]

    def put_many(self, items: Mapping[str, np.ndarray], *, model_id: str = "") -> None:
        rows = [
            ToolEmbedding(key=key, model_id=model_id, dim=int(np.asarray(v).shape[0]), vector=np.asarray(v, dtype="<f4").tobytes())
            for key, v in items.items()
        ]
        # Same key, same text, same model: the vector is the same, so a row another process wrote
        # first is as good as ours (ignore_conflicts: no error, no second write).
        ToolEmbedding.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)


VECTOR_STORES = ("database", "file", "memory")


def make_store(kind: str) -> VectorStore | None:
    """The store TOOLSEARCH_VECTOR_STORE names; None = the engine's own default (the SQLite file)."""
    kind = (kind or "database").strip().lower()
    if kind == "database":
        return DatabaseVectorStore()
    if kind == "memory":
        return MemoryVectorStore()
    if kind == "file":
        path = default_cache_path()
        return SqliteVectorStore(path) if path is not None else MemoryVectorStore()
    raise ValueError(f"TOOLSEARCH_VECTOR_STORE={kind!r}: choose one of {', '.join(VECTOR_STORES)}")


class DatabaseIndexStore(IndexStore):
    """Prebuilt indexes in `StoredSearchIndex` rows; the newest `keep` are kept (a few catalog
    versions, each with its BM25 and dense parts, and a few tuned settings)."""

    def __init__(self, keep: int = 12) -> None:
        self.keep = keep

    def get(self, key: str) -> bytes | None:
        if connection.vendor == "postgresql":
            return _read_binary(f"SELECT data FROM {connection.ops.quote_name(StoredSearchIndex._meta.db_table)} WHERE key = %s", key)
        blob = StoredSearchIndex.objects.filter(key=key).values_list("data", flat=True).first()
        return bytes(blob) if blob is not None else None

    def put(self, key: str, data: bytes) -> None:
        StoredSearchIndex.objects.update_or_create(key=key, defaults={"data": data, "size": len(data)})
        stale = list(StoredSearchIndex.objects.order_by("-created_at", "-id").values_list("id", flat=True)[self.keep :])
        if stale:
            StoredSearchIndex.objects.filter(id__in=stale).delete()


def _read_binary(sql: str, *params: object) -> bytes | None:
    """The first column of the first row, asked for in PostgreSQL's binary format. Django's cursors
    bind on the client, which only reads text: a bytea arrives as hex, twice its size, encoded by the
    server and decoded here (a 150 MB stored index: 4.2 s against 1.4 s, most of a first search)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        row = cursor.fetchone()
    return None if row is None else bytes(row[0])
