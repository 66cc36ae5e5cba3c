"""Celery tasks of the registry: thin wrappers around services."""
from __future__ import annotations

from typing import Any

from playground.celery_app import app
from playground.registry import indexing


@app.task(name="registry.build_search_index")
def build_search_index_task(version: str) -> dict[str, Any]:
    row = indexing.build_index(version)
    if row is None:
        return {"version": version, "status": "unknown"}
    return {"version": version, "status": row.status, "total": row.total, "embedded": row.embedded, "encoded": row.encoded}
