"""The rows of the background search index builds (`SearchIndexBuild`): whether builds run in the
background at all, queueing one for a catalog version and encoder, and what pages and searches say
about the current one.

The build's work is `indexing.py` (it runs in a worker and asks `backends.py` for the backend and
the stores); `backends.py` asks this module to queue a build when a search finds vectors missing.
Neither of those two imports the other's caller, and the task is queued by name
(`registry.build_search_index`), so no module here imports another that imports it back.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from playground.queueing import queue_task
from playground.registry import adapter
from playground.registry.models import SearchIndexBuild

logger = logging.getLogger(__name__)

BUILD_TASK = "registry.build_search_index"
# A build whose row has not moved for this long is taken as dead (its worker went away): the next
# request queues it again. One that failed (e.g. the broker was not up yet) is retried sooner.
STALE_AFTER = timedelta(minutes=10)
RETRY_FAILED_AFTER = timedelta(seconds=30)


def builds_in_background() -> bool:
    """False with TOOLSEARCH_VECTOR_STORE=memory: a worker's vectors would never reach the web
    process, so nothing is built in the background and searches encode as before."""
    return (settings.TOOLSEARCH_VECTOR_STORE or "database").strip().lower() != "memory"


def catalog_part() -> str:
    count, latest = adapter.catalog_version()
    return f"{count}:{latest.isoformat() if latest else '-'}"


def index_version(model_id: str) -> str:
    return f"{catalog_part()}|{model_id}"


def is_stale(row: SearchIndexBuild) -> bool:
    if row.status == SearchIndexBuild.Status.DONE:
        return False
    wait = RETRY_FAILED_AFTER if row.status == SearchIndexBuild.Status.FAILED else STALE_AFTER
    return row.updated_at < timezone.now() - wait


def schedule_build(spec: str, model_id: str) -> SearchIndexBuild | None:
    """Queue a build of the current catalog for the encoder `model_id` (of backend `spec`, "" for the
    default), unless one is queued, running or done for this catalog version (None: nothing is built
    in the background). Never raises: a search or an import must not fail because the broker is down
    (the row says so, and the next request retries)."""
    if not builds_in_background():
        return None
    version = index_version(model_id)
    row, created = SearchIndexBuild.objects.get_or_create(version=version, defaults={"backend": spec, "model_id": model_id})
    if not created:
        if not is_stale(row):
            return row
        row.status, row.error, row.queue_attempts = SearchIndexBuild.Status.QUEUED, "", 0
        row.save(update_fields=["status", "error", "queue_attempts", "updated_at"])
    try:
        queue_task(BUILD_TASK, version)
    except Exception as exc:
        logger.exception("could not queue the search index build %s", version)
        row.status, row.error = SearchIndexBuild.Status.FAILED, f"could not queue the build (is Redis running?): {exc}"
        row.save(update_fields=["status", "error", "updated_at"])
    return row


def current_build() -> SearchIndexBuild | None:
    """The newest build of the current catalog version (any encoder), or None."""
    return SearchIndexBuild.objects.filter(version__startswith=catalog_part() + "|").order_by("-created_at", "-id").first()


def progress_note() -> str:
    """A sentence about the current catalog's build, for a search that could not use its vectors."""
    row = current_build()
    if row is None:
        return "the search index of this catalog is not built yet"
    if row.status == SearchIndexBuild.Status.FAILED:
        return f"building the search index failed ({row.error})"
    if row.total:
        return f"search index being built: {row.embedded:,} of {row.total:,} tools embedded"
    return "search index build queued"
