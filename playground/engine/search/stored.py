"""Prebuilt indexes kept outside the process, so that a fresh process loads an index instead of
building it.

Building the BM25 index of 100,000 tools means analysing every tool's fields (seconds of regular
expressions and stemming) and making the tool documents behind the vector keys; every web process
and worker used to do it again on its first search. A backend that can store its index
(`SearchBackend.stored_index_key`, `dump_index`, `load_index`: the BM25 postings; the dense side's
vector keys, vocabulary and vectors) is handed an `IndexStore`; `index_for` then asks the store before
building. Whoever builds the catalog's index anyway (the web app's background index build) calls
`save_indexes`. A stored index is keyed by the catalog's fingerprint and the backend's settings,
so it is only ever loaded for the very catalog and settings it was built from; loading gives the
same arrays a fresh build gives (tested), so results are the same.

The format is NumPy's `.npz` without pickles: arrays, plus lists of strings joined by NUL.
"""
from __future__ import annotations

import io
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from playground.engine.search.base import SearchBackend
    from playground.engine.tools import ToolCatalog

logger = logging.getLogger(__name__)

# Part of every key: bump it when the analysis (text.py) or an index's layout changes, so that
# indexes stored by older code are not loaded.
FORMAT = 1


class IndexStore:
    """Where prebuilt indexes are kept, by key. Must be safe to call from several threads."""

    def get(self, key: str) -> bytes | None:
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError


class MemoryIndexStore(IndexStore):
    """Indexes in this process only (tests), the last `limit` of them."""

    def __init__(self, limit: int = 16) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._items[key] = bytes(data)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)


def pack(arrays: dict[str, np.ndarray], texts: dict[str, Sequence[str]], meta: dict[str, Any]) -> bytes:
    """Arrays, string lists and a JSON-able dict as one `.npz` blob (no pickles)."""
    payload: dict[str, np.ndarray] = {f"a.{name}": np.ascontiguousarray(value) for name, value in arrays.items()}
    for name, values in texts.items():
        joined = "\x00".join(values)
        if any("\x00" in value for value in values):
            raise ValueError(f"{name}: a string holds NUL, which separates them")
        payload[f"t.{name}"] = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
        payload[f"n.{name}"] = np.asarray([len(values)], dtype=np.int64)
    payload["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **payload)
    return out.getvalue()


def unpack(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, list[str]], dict[str, Any]]:
    arrays: dict[str, np.ndarray] = {}
    texts: dict[str, list[str]] = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        meta = json.loads(loaded["meta"].tobytes().decode("utf-8"))
        for name in loaded.files:
            kind, _, rest = name.partition(".")
            if kind == "a":
                arrays[rest] = loaded[name]
            elif kind == "t":
                count = int(loaded[f"n.{rest}"][0])
                joined = loaded[name].tobytes().decode("utf-8")
                texts[rest] = joined.split("\x00") if count else []
    return arrays, texts, meta


def index_sides(backend: SearchBackend) -> list[SearchBackend]:
    """The backends inside `backend` that keep a catalog index of their own (a wrapper's inner
    backend; hybrid's BM25 and dense sides; the backend itself)."""
    inner = getattr(backend, "inner", None)
    if inner is not None and inner is not backend:
        return index_sides(inner)
    sides = [side for side in (getattr(backend, "bm25", None), getattr(backend, "semantic", None))
             if side is not None and side is not backend and hasattr(side, "stored_index_key")]
    return sides or [backend]


def use_index_store(backend: SearchBackend, store: IndexStore | None) -> None:
    """Let every index-keeping part of `backend` load its prebuilt index from `store`."""
    for side in index_sides(backend):
        side.index_store = store


def save_indexes(backend: SearchBackend, catalog: ToolCatalog, store: IndexStore) -> list[str]:
    """Build (or reuse) `backend`'s index of `catalog` and store each part that can be stored;
    the keys written."""
    written: list[str] = []
    for side in index_sides(backend):
        key = side.stored_index_key(catalog)
        if key is None:
            continue
        store.put(key, side.stored_index_data(catalog))
        written.append(key)
    return written
