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
import zipfile
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from playground.engine.search.index_store import IndexStore

if TYPE_CHECKING:
    from playground.engine.search.base import SearchBackend
    from playground.engine.tools import ToolCatalog

logger = logging.getLogger(__name__)

# Part of every key: bump it when the analysis (text.py) or an index's layout changes, so that
# indexes stored by older code are not loaded.
FORMAT = 1


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
    # An `.npz` as `np.savez` writes it (uncompressed), but with each member's array data at a
    # multiple of 64 bytes of the blob (padding in the local header's extra field, as zipalign
    # does), so that `unpack` can read the arrays in place, aligned.
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in payload.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            body = member.getvalue()
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            data_start = out.tell() + 30 + len(info.filename.encode("utf-8")) + 4 + _npy_header_length(body)
            padding = -data_start % _ALIGN
            info.extra = _PADDING_FIELD.to_bytes(2, "little") + padding.to_bytes(2, "little") + b"\x00" * padding
            archive.writestr(info, body)
    return out.getvalue()


_ALIGN = 64
_MAX_NPY_HEADER = 12 + 65_535  # magic, version and length, then the header (longer ones: NumPy reads the blob)
_PADDING_FIELD = 0xD935  # the extra-field id zipalign uses for padding


def _npy_header_length(body: bytes) -> int:
    """Where the array data begins in a `.npy` member (after its magic and header)."""
    member = io.BytesIO(body)
    version = np.lib.format.read_magic(member)
    (np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0)(member)
    return member.tell()


def unpack(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, list[str]], dict[str, Any]]:
    """What `pack` packed. The arrays are read-only views of `data` (which they keep alive), not
    copies: at 100,000 tools the dense blob's vectors are 150 MB, and NumPy's `.npz` reader copies
    them in 256 kB pieces through `zipfile` (a CRC per piece) — a third of a fresh process's first
    search, and 150 MB more at its peak. A blob from elsewhere (compressed, or another layout) is
    read the ordinary way."""
    arrays: dict[str, np.ndarray] = {}
    texts: dict[str, list[str]] = {}
    members = _stored_members(data)
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        def read(name: str) -> np.ndarray:
            found = members.get(name + ".npy")
            return found if found is not None else loaded[name]

        meta = json.loads(read("meta").tobytes().decode("utf-8"))
        for name in loaded.files:
            kind, _, rest = name.partition(".")
            if kind == "a":
                arrays[rest] = read(name)
            elif kind == "t":
                count = int(read(f"n.{rest}")[0])
                joined = read(name).tobytes().decode("utf-8")
                texts[rest] = joined.split("\x00") if count else []
    return arrays, texts, meta


def _stored_members(data: bytes) -> dict[str, np.ndarray]:
    """The `.npy` members of an `.npz` blob stored without compression, as read-only arrays over
    `data` (no copy); members it cannot read so are left out (the caller reads those with NumPy)."""
    views: dict[str, np.ndarray] = {}
    buffer = memoryview(data)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
                    continue
                # The local header: 30 bytes, then the name and the extra field (lengths at 26, 28).
                start = info.header_offset
                name_length = int.from_bytes(data[start + 26 : start + 28], "little")
                extra_length = int.from_bytes(data[start + 28 : start + 30], "little")
                begin = start + 30 + name_length + extra_length
                member = io.BytesIO(buffer[begin : begin + min(info.file_size, _MAX_NPY_HEADER)])  # the header only
                version = np.lib.format.read_magic(member)
                if version not in ((1, 0), (2, 0)):
                    continue
                header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran_order, dtype = header(member)
                if fortran_order or dtype.hasobject:
                    continue
                count = int(np.prod(shape, dtype=np.int64))
                if member.tell() + count * dtype.itemsize > info.file_size:
                    continue
                view = np.frombuffer(data, dtype=dtype, count=count, offset=begin + member.tell()).reshape(shape)
                if view.flags.aligned:  # a blob written before `pack` aligned its members: NumPy reads it
                    views[info.filename] = view
    except (zipfile.BadZipFile, ValueError):
        return {}
    return views


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
