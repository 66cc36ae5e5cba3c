"""The search index off the request path: tool vectors are computed in the background.

A catalog change (an import, a tool created or edited, a bulk action, an MCP sync) calls
`request_index_build()`; once the transaction commits, `schedule_index_build` records a
`SearchIndexBuild` row for the new catalog version and encoder and queues the Celery task
`registry.build_search_index`, which encodes, in batches, the deferred tools whose text has no
stored vector yet (`vectors.DatabaseVectorStore`) and records its progress on the row; at the end it
stores the backend's prebuilt indexes of the catalog (`store_indexes`: BM25 postings, vector keys and vectors),
which every process then loads instead of analysing 100,000 tools on its first search. One row per
(catalog version, model id): a second request for the same version finds the row and queues
nothing, and a second task for it finds the build running or done and does nothing.

Searches meanwhile never encode a whole catalog in the request: the engine's `IndexedOrFallback`
(wrapped around each backend by the adapter) answers from the last complete index, or with the
keyword backend, and says so; `index_builds.progress_note` is what it says about the build.

With TOOLSEARCH_VECTOR_STORE=memory a worker's vectors would never reach the web process, so
nothing is built in the background and searches encode as before.

The build rows themselves (queueing one, the current build, what a search says about it) are
`index_builds.py`: `backends.py` uses it too, so it and this module need not ask each other.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from playground import lost_tasks
from playground.engine.search import equivalence, stored
from playground.engine.search.embedding_cache import embedding_key
from playground.engine.search.semantic import SemanticBackend, dense_side
from playground.engine.search.text import tool_document
from playground.registry import adapter, backends
from playground.registry.index_builds import BUILD_TASK, builds_in_background, index_version, is_stale, schedule_build
from playground.registry.models import SearchIndexBuild

logger = logging.getLogger(__name__)

BATCH = 256  # tool texts per encoder call and per progress update


def _dense(spec: str = "") -> SemanticBackend | None:
    return dense_side(backends.search_backend(spec or None))


def request_index_build(spec: str = "") -> None:
    """After this transaction commits, make sure the current catalog's vectors get built."""
    transaction.on_commit(lambda: schedule_index_build(spec))


def schedule_index_build(spec: str = "") -> SearchIndexBuild | None:
    """Queue a build of the current catalog for `spec`'s encoder (the default backend's when empty),
    unless one is queued, running or done for this catalog version (`index_builds.schedule_build`;
    never raises). None when nothing is built in the background or the backend has no dense side."""
    if not builds_in_background():
        return None
    try:
        dense = _dense(spec)
    except ValueError:  # a profile's backend that no longer loads: its searches say why
        return None
    if dense is None:  # no dense side (keyword backends, or the semantic extra missing)
        return None
    return schedule_build(spec, dense.encoder.model_id)


def build_index(version: str) -> SearchIndexBuild | None:
    """The task's work: embed the current catalog's deferred tools that have no stored vector, in
    batches, recording progress. Idempotent: a build that is done (or running elsewhere) is left
    alone, and tools already stored are never encoded again."""
    with transaction.atomic():
        row = SearchIndexBuild.objects.select_for_update().filter(version=version).first()
        if row is None or row.status == SearchIndexBuild.Status.DONE:
            return row
        if row.status == SearchIndexBuild.Status.RUNNING and not is_stale(row):
            return row  # a duplicate task: the first one is at work
        row.status, row.started_at, row.error = SearchIndexBuild.Status.RUNNING, timezone.now(), ""
        row.save(update_fields=["status", "started_at", "error", "updated_at"])
    try:
        _embed_missing(row)
    except Exception as exc:
        logger.exception("search index build %s failed", version)
        row.status, row.error, row.finished_at = SearchIndexBuild.Status.FAILED, f"{exc.__class__.__name__}: {exc}", timezone.now()
        row.save(update_fields=["status", "error", "finished_at", "updated_at"])
    return row


def _embed_missing(row: SearchIndexBuild) -> None:
    dense = _dense(row.backend)
    store = backends.vector_store()
    if dense is None or store is None or dense.encoder.model_id != row.model_id:
        raise RuntimeError(f"the encoder of backend {row.backend or 'default'!r} is not {row.model_id!r} in this process")
    if index_version(row.model_id) != row.version:
        _finish(row, SearchIndexBuild.Status.SUPERSEDED)
        return
    tools = tuple(adapter.engine_catalog().deferred)
    include_server = dense.include_server(tools)
    documents: dict[str, str] = {}
    for tool in tools:
        text = tool_document(tool, include_server=include_server)
        documents.setdefault(embedding_key(row.model_id, text), text)
    missing = store.missing_keys(list(documents), dense.encoder.dim)
    row.total, row.embedded, row.encoded = len(documents), len(documents) - len(missing), 0
    row.save(update_fields=["total", "embedded", "encoded", "updated_at"])
    for start in range(0, len(missing), BATCH):
        if start and index_version(row.model_id) != row.version:
            _finish(row, SearchIndexBuild.Status.SUPERSEDED)  # the newer build takes over from here
            return
        keys = missing[start : start + BATCH]
        vectors = dense.encoder.encode([documents[key] for key in keys])
        store.put_many(dict(zip(keys, vectors)), model_id=row.model_id)
        row.embedded += len(keys)
        row.encoded += len(keys)
        row.save(update_fields=["embedded", "encoded", "updated_at"])
    store_indexes(row.backend)
    _finish(row, SearchIndexBuild.Status.DONE)


def store_indexes(spec: str = "") -> list[str]:
    """Store the backend's prebuilt indexes of the current catalog (BM25 postings, vector keys and vectors, the same-operation groups), so
    that every process loads them instead of analysing the catalog on its first search; the keys
    written (none when nothing is built in the background)."""
    store = backends.index_store()
    if store is None:
        return []
    backend = backends.search_backend(spec or None)
    catalog = adapter.engine_catalog()
    permitted = adapter.filtered_catalog(None)[1].permitted  # what searches without a profile rank
    written: list[str] = []
    for searched in [catalog] if permitted.fingerprint == catalog.fingerprint else [catalog, permitted]:
        written += stored.save_indexes(backend, searched, store)
        # The inspector groups its results by same operation on other servers (made from the whole catalog).
        written.append(equivalence.save_same_operation(searched, store))
    return written


def _finish(row: SearchIndexBuild, status: str) -> None:
    row.status, row.finished_at = status, timezone.now()
    row.save(update_fields=["status", "finished_at", "updated_at"])


# -- builds whose task the broker lost (playground/lost_tasks.py) ----------------------------------
def unclaimed_builds(grace: float) -> dict[int, str]:
    """Builds still queued `grace` seconds after their task was sent: row id → catalog version."""
    cutoff = timezone.now() - timedelta(seconds=grace)
    return dict(SearchIndexBuild.objects.filter(status=SearchIndexBuild.Status.QUEUED, updated_at__lt=cutoff)
                .values_list("pk", "version"))


def requeue_lost_build(row_id: int, version: str) -> str:
    """Send a queued build's task again, or fail the build once AGENT_QUEUE_ATTEMPTS re-sends are used
    up (the next search or catalog change queues it again after RETRY_FAILED_AFTER). Re-checked under
    the row lock: "" when a worker started it (or another watch re-sent it) meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        row = SearchIndexBuild.objects.select_for_update().filter(
            pk=row_id, version=version, status=SearchIndexBuild.Status.QUEUED,
            updated_at__lt=now - timedelta(seconds=lost_tasks.grace_seconds())).first()
        if row is None:
            return ""
        if lost_tasks.attempts_used(row.queue_attempts):
            row.status, row.finished_at = SearchIndexBuild.Status.FAILED, now
            row.error = lost_tasks.lost_reason((now - row.updated_at).total_seconds(), row.queue_attempts)
            row.save(update_fields=["status", "error", "finished_at", "updated_at"])
            return lost_tasks.FAILED
        row.queue_attempts += 1
        row.save(update_fields=["queue_attempts", "updated_at"])  # the next grace counts from the re-send
        lost_tasks.send_again(BUILD_TASK, version, what=f"the search index build {version}")
    return lost_tasks.REQUEUED


LOST_BUILDS = lost_tasks.watch(lost_tasks.Kind(
    name="search index build", tasks=frozenset({BUILD_TASK}), key_of=lost_tasks.first_arg,
    unclaimed=unclaimed_builds, lost=requeue_lost_build))
