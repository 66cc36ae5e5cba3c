"""Where prebuilt search indexes are kept: the interface a backend is handed (stored.py keeps and
loads them; the registry's database store implements it). Its own module so that the backends'
contract (base.py) can name it without knowing how indexes are stored.
"""
from __future__ import annotations


class IndexStore:
    """Where prebuilt indexes are kept, by key. Must be safe to call from several threads."""

    def get(self, key: str) -> bytes | None:
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError
