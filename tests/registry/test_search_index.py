"""Indexes off the request path: tool vectors stored in the database, built in the background, and
searches that never encode a catalog while it is being built."""
from __future__ import annotations

import numpy as np
import pytest

from playground.engine.search.embedding_cache import EmbeddingCache
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search import embedding_cache, semantic
from playground.registry import adapter, backends, index_builds, indexing, services, tasks
from playground.registry.models import SearchIndexBuild, ToolEmbedding
from playground.registry.vectors import DatabaseVectorStore, make_store
from tests.search.fake_encoder import FakeEncoder

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_encoder(monkeypatch):
    """Every backend the adapter makes encodes with one FakeEncoder (no model, instant)."""
    encoder = FakeEncoder()
    monkeypatch.setattr(semantic, "shared_encoder", lambda runtime=None: encoder)
    monkeypatch.setattr(embedding_cache, "_shared_caches", {})  # no vectors in memory from an earlier test
    adapter.reset_caches()
    backends.reset_caches()
    yield encoder
    adapter.reset_caches()
    backends.reset_caches()


@pytest.fixture
def queued(monkeypatch):
    """The versions handed to the build task (no broker needed)."""
    versions: list[str] = []
    monkeypatch.setattr(tasks.build_search_index_task, "delay", versions.append)
    return versions



def _process_backend(encoder: FakeEncoder) -> HybridBackend:
    """A backend as a fresh process has it: its own memory layer, the database behind it."""
    backend = HybridBackend(semantic={"encoder": encoder})
    backend.semantic.cache = EmbeddingCache(None, encoder.dim, store=DatabaseVectorStore())
    return backend


def test_two_processes_share_the_vectors_stored_in_the_database(tools):
    catalog = adapter.engine_catalog()
    first_encoder, second_encoder = FakeEncoder(), FakeEncoder()
    first = _process_backend(first_encoder).search("create a github issue", catalog)
    assert len(first_encoder.texts) == len(catalog.deferred) + 1  # the tools, then the query
    assert ToolEmbedding.objects.count() == len(catalog.deferred)
    row = ToolEmbedding.objects.first()
    assert row.model_id == "fake-encoder" and row.dim == 32 and len(bytes(row.vector)) == 32 * 4
    second = _process_backend(second_encoder).search("create a github issue", catalog)
    assert second_encoder.texts == ["create a github issue"]  # the query only: the tools were loaded
    assert second.matches == first.matches and second.scored[0].score == first.scored[0].score


def test_the_store_writes_a_key_once_and_reads_only_its_dimension(db):
    store = DatabaseVectorStore()
    store.put_many({"k": np.ones(4, dtype=np.float32)}, model_id="m")
    store.put_many({"k": np.ones(4, dtype=np.float32), "j": np.zeros(4, dtype=np.float32)}, model_id="m")
    assert ToolEmbedding.objects.count() == 2
    assert set(store.get_many(["k", "j", "x"], 4)) == {"k", "j"} and store.get_many(["k"], 8) == {}
    assert store.missing_keys(["k", "x"], 4) == ["x"]


def test_the_setting_picks_the_store(settings):
    assert isinstance(make_store("database"), DatabaseVectorStore)
    with pytest.raises(ValueError, match="TOOLSEARCH_VECTOR_STORE='disk'"):
        make_store("disk")
    settings.TOOLSEARCH_VECTOR_STORE = "database"
    backend = backends.search_backend("hybrid")
    if backend.semantic is not None:  # with the semantic extra installed
        assert isinstance(backend.semantic.cache.store, DatabaseVectorStore)


def test_the_build_embeds_missing_vectors_once_and_a_second_run_encodes_nothing(tools, fake_encoder, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        indexing.request_index_build()
    assert len(queued) == 1
    result = tasks.build_search_index_task(queued[0])
    deferred = len(adapter.engine_catalog().deferred)
    assert result == {"version": queued[0], "status": "done", "total": deferred, "embedded": deferred, "encoded": deferred}
    assert len(fake_encoder.texts) == deferred and ToolEmbedding.objects.count() == deferred
    # The same task again (a duplicate, or a redelivery) does nothing ...
    assert tasks.build_search_index_task(queued[0])["encoded"] == deferred
    assert len(fake_encoder.texts) == deferred
    # ... and a build that runs again finds every vector stored.
    SearchIndexBuild.objects.update(status=SearchIndexBuild.Status.QUEUED)
    assert tasks.build_search_index_task(queued[0])["encoded"] == 0 and len(fake_encoder.texts) == deferred


def test_one_build_per_catalog_version(tools, fake_encoder, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        indexing.request_index_build()
        indexing.request_index_build()
    assert len(queued) == 1 and SearchIndexBuild.objects.count() == 1
    tools[3].description = "List open issues of a GitHub repository"
    with django_capture_on_commit_callbacks(execute=True):
        tools[3].save()
        indexing.request_index_build()
    assert len(queued) == 2 and queued[0] != queued[1]
    # The first build, run after the catalog changed again, leaves the work to the second.
    assert tasks.build_search_index_task(queued[0])["status"] == "superseded" and fake_encoder.texts == []
    assert tasks.build_search_index_task(queued[1])["status"] == "done"


def test_a_running_build_is_not_started_twice_unless_it_went_stale(tools, fake_encoder, queued):
    row = indexing.schedule_index_build()
    SearchIndexBuild.objects.filter(pk=row.pk).update(status=SearchIndexBuild.Status.RUNNING)
    assert tasks.build_search_index_task(row.version)["status"] == "running" and fake_encoder.texts == []
    assert indexing.schedule_index_build().pk == row.pk and len(queued) == 1
    SearchIndexBuild.objects.filter(pk=row.pk).update(updated_at=row.updated_at - index_builds.STALE_AFTER * 2)
    assert indexing.schedule_index_build().pk == row.pk and len(queued) == 2  # its worker went away: queued again
    assert tasks.build_search_index_task(row.version)["status"] == "done"


def test_a_broker_that_is_down_is_recorded_not_raised(tools, fake_encoder, monkeypatch):
    def down(version):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(tasks.build_search_index_task, "delay", down)
    row = indexing.schedule_index_build()
    assert row.status == "failed" and "is Redis running?" in row.error
    assert "failed" in index_builds.progress_note()
    assert indexing.schedule_index_build().status == "failed"  # not retried at once by every search ...
    SearchIndexBuild.objects.filter(pk=row.pk).update(updated_at=row.updated_at - index_builds.RETRY_FAILED_AFTER * 2)
    monkeypatch.setattr(tasks.build_search_index_task, "delay", lambda version: None)
    assert indexing.schedule_index_build().status == "queued"  # ... but soon after (the broker is up by now)


def test_memory_vectors_are_not_built_in_the_background(tools, fake_encoder, queued, settings):
    settings.TOOLSEARCH_VECTOR_STORE = "memory"
    assert indexing.schedule_index_build() is None and queued == []


def test_an_import_queues_the_build(admin_user, fake_encoder, queued, django_capture_on_commit_callbacks):
    staged, preview = services.stage_import('{"name": "mcp__x__ping", "description": "Ping a host"}\n', user=admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        services.commit_import(staged)
    assert len(queued) == 1 and index_builds.current_build().version == queued[0]


def test_an_mcp_sync_that_adds_tools_queues_the_build(db, fake_encoder, queued, django_capture_on_commit_callbacks):
    from playground.mcp_servers import services as mcp_services
    from playground.mcp_servers.connection import McpToolListing, ServerProbe
    from playground.mcp_servers.models import McpServer

    server = McpServer.objects.create(name="demo", transport="stdio", command="true")
    listing = [McpToolListing("ping", "Ping a host", {"type": "object", "properties": {}})]
    probe = ServerProbe("demo", "1", "2025-06-18", 1, 1.0)
    with django_capture_on_commit_callbacks(execute=True):
        assert mcp_services.apply_listing(server, listing, probe).added == ["mcp__demo__ping"]
    assert len(queued) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert mcp_services.apply_listing(server, listing, probe).unchanged == 1
    assert len(queued) == 1  # nothing changed: nothing to build


INSPECTOR = "/inspector/"


def test_an_inspector_search_during_a_build_falls_back_and_says_so(viewer_client, tools, fake_encoder, queued):
    from tests.registry.conftest import bulk_tools

    bulk_tools(100)  # more tools without a vector than a request encodes itself
    response = viewer_client.get(INSPECTOR, {"q": "create a github issue", "backend": "hybrid"}, headers={"HX-Request": "true"})
    result = response.context["answer"].result
    assert fake_encoder.texts == []  # nothing encoded in the request (not even the query: no dense side ran)
    assert result.index_state == "fallback" and result.matches[0] == "mcp__github__create_issue"
    body = response.content.decode()
    assert 'data-testid="index-note" data-index-state="fallback"' in body
    assert "answered by the claude-code keyword backend while the index is built" in body
    assert len(queued) == 1  # the search made sure a build is queued
    row = SearchIndexBuild.objects.get()
    SearchIndexBuild.objects.filter(pk=row.pk).update(status="running", total=104, embedded=40)
    again = viewer_client.get(INSPECTOR, {"q": "create a github issue", "backend": "hybrid"}, headers={"HX-Request": "true"})
    assert "search index being built: 40 of 104 tools embedded" in again.content.decode() and len(queued) == 1
    SearchIndexBuild.objects.filter(pk=row.pk).update(status="queued")  # (the running state above was only shown)
    assert tasks.build_search_index_task(row.version)["status"] == "done"
    fake_encoder.texts.clear()
    done = viewer_client.get(INSPECTOR, {"q": "create a github issue", "backend": "hybrid"}, headers={"HX-Request": "true"})
    assert done.context["answer"].result.index_state == "" and 'data-testid="index-note"' not in done.content.decode()
    assert fake_encoder.texts == ["create a github issue"]  # the query only: the tools were loaded from the database


def test_a_conversation_search_during_a_build_carries_the_note(admin_user, tools, fake_encoder, queued):
    from playground.conversations.providers.demo import DemoAgentProvider
    from playground.registry.models import AgentProfile
    from tests.conversations.conftest import converse, events_of
    from tests.registry.conftest import bulk_tools

    bulk_tools(100)
    profile = AgentProfile.objects.create(name="native", tool_search_mode="true", wire_style="native")
    conversation, _ = converse(admin_user, "Create a GitHub issue titled outage", profile=profile, provider=DemoAgentProvider())
    search = events_of(conversation, "toolsearch_query")[0]
    assert search.payload["notes"] and "while the index is built" in search.payload["notes"][0]
    assert _tool_count(fake_encoder) == 0


def _tool_count(encoder: FakeEncoder) -> int:
    return sum(1 for text in encoder.texts if "(" in text)


def test_the_tools_page_shows_the_build_progress_and_polls_while_it_runs(viewer_client, tools, fake_encoder, queued):
    page = viewer_client.get("/tools/").content.decode()
    assert 'data-testid="search-index" data-status="none"' in page and "not built for this catalog yet" in page
    row = indexing.schedule_index_build()
    SearchIndexBuild.objects.filter(pk=row.pk).update(status="running", total=10_000, embedded=8_200)
    page = viewer_client.get("/tools/").content.decode()
    assert "8,200 of 10,000 tools embedded" in page and 'hx-trigger="every 2s"' in page
    fragment = viewer_client.get("/tools/search-index/", headers={"HX-Request": "true"}).content.decode()
    assert fragment.strip().startswith('<p class="muted" id="search-index"') and "8,200 of 10,000" in fragment
    SearchIndexBuild.objects.filter(pk=row.pk).update(status="queued")
    tasks.build_search_index_task(row.version)
    done = viewer_client.get("/tools/search-index/").content.decode()
    assert 'data-status="done"' in done and "4 of 4 tools embedded (4 encoded by the last build)" in done
    assert "every 2s" not in done  # finished: no more polling


def test_the_build_stores_the_index_and_a_fresh_process_loads_it_with_the_same_ranking(tools, fake_encoder, queued, monkeypatch):
    from playground.engine.search import bm25 as bm25_module
    from playground.engine.search.bm25 import BM25Backend
    from playground.registry.models import StoredSearchIndex
    from tests.registry.conftest import bulk_tools

    bulk_tools(100)
    queries = ["create a github issue", "post a message to slack", "+git list", "tool number 7", "nothing like this"]
    row = indexing.schedule_index_build()
    assert tasks.build_search_index_task(row.version)["status"] == "done"
    assert sorted(key.split(".")[0].split("|")[0] for key in StoredSearchIndex.objects.values_list("key", flat=True)) == [
        "bm25f", "dense", "same-operation"]
    catalog = adapter.filtered_catalog(None)[1].permitted
    built = [backends.search_backend("").search(q, catalog).to_dict() for q in queries]

    # A fresh process: its own catalog, backends and memos; the BM25 index must come from the row.
    adapter.reset_caches()
    monkeypatch.setattr(embedding_cache, "_shared_caches", {})
    bm25_module._analysis_cache.clear()
    monkeypatch.setattr(BM25Backend, "build_index", lambda *a, **k: pytest.fail("the BM25 index was built, not loaded"))
    fake_encoder.texts.clear()
    catalog = adapter.filtered_catalog(None)[1].permitted
    loaded = [backends.search_backend("").search(q, catalog).to_dict() for q in queries]
    assert loaded == built
    assert all(result["backend"] == "hybrid" and "notes" not in result for result in loaded)
    assert _tool_count(fake_encoder) == 0  # only queries were encoded


def test_the_index_store_keeps_the_newest_rows(db):
    from playground.registry.models import StoredSearchIndex
    from playground.registry.vectors import DatabaseIndexStore

    store = DatabaseIndexStore(keep=2)
    for n in range(4):
        store.put(f"k{n}", bytes([n]) * 3)
    store.put("k3", b"new")  # the same key again replaces its row
    assert sorted(StoredSearchIndex.objects.values_list("key", flat=True)) == ["k2", "k3"]
    assert store.get("k3") == b"new" and store.get("k0") is None


def test_the_inspectors_first_search_in_a_fresh_process_reads_what_the_build_stored_and_makes_nothing(tools, fake_encoder, queued, monkeypatch):
    """The web path of a first search (the inspector's service, as a page or a conversation turn runs
    it): the BM25 and dense indexes, the inspector's same-operation groups and the tools' content
    hashes all come from the database; nothing is analysed, made or hashed again."""
    from functools import cached_property

    from playground.engine import tools as engine_tools
    from playground.engine.search import bm25 as bm25_module
    from playground.engine.search import equivalence
    from playground.engine.search.bm25 import BM25Backend
    from playground.engine.search.semantic import SemanticBackend
    from playground.registry import previews
    from tests.registry.conftest import make_tool

    make_tool("mcp__gitlab__create_issue", "Open a new issue in a GitLab project", source="imported")  # same operation as GitHub's
    query = "create an issue"
    row = indexing.schedule_index_build()
    assert tasks.build_search_index_task(row.version)["status"] == "done"
    built = previews.inspect_query(query)
    assert built.same_operation and {m[0] for m in built.same_operation[0].members} == {
        "mcp__github__create_issue", "mcp__gitlab__create_issue"}

    # A fresh process: its own catalog, backends, memos and groups.
    adapter.reset_caches()
    backends.reset_caches()
    monkeypatch.setattr(embedding_cache, "_shared_caches", {})
    monkeypatch.setattr(equivalence, "_cache", type(equivalence._cache)())
    bm25_module._analysis_cache.clear()

    def made(what):
        def fail(*args, **kwargs):
            pytest.fail(f"{what} was made in the request, not read from what the build stored")
        return fail

    monkeypatch.setattr(BM25Backend, "build_index", made("the BM25 index"))
    monkeypatch.setattr(SemanticBackend, "build_index", made("the dense index"))
    monkeypatch.setattr(equivalence, "_Keys", made("the same-operation groups"))
    hashed = cached_property(made("a tool's content hash"))
    hashed.__set_name__(engine_tools.Tool, "content_hash")
    monkeypatch.setattr(engine_tools.Tool, "content_hash", hashed)
    fake_encoder.texts.clear()
    loaded = previews.inspect_query(query)
    assert loaded.result.matches == built.result.matches and not loaded.result.index_state
    assert [s.score for s in loaded.result.scored] == [s.score for s in built.result.scored]
    assert loaded.same_operation == built.same_operation
    assert _tool_count(fake_encoder) == 0  # no tool encoded (the query at most)


def test_each_tool_row_keeps_its_content_hash_through_every_write(tools, fake_encoder, queued):
    from playground.registry.models import Tool
    from playground.registry.tool_fields import tool_to_engine

    def agrees() -> bool:
        rows = list(Tool.objects.select_related("server"))
        return all(row.content_hash == tool_to_engine(row).content_hash for row in rows) and all(r.content_hash for r in rows)

    assert agrees()
    row = Tool.objects.get(name="mcp__github__create_issue")
    before = row.content_hash
    row.description = "Create an issue"
    row.save(update_fields=["description"])
    row.refresh_from_db()
    assert row.content_hash != before and agrees()
    services.bulk_tool_action(Tool.objects.filter(name__startswith="mcp__github"), "defer")
    staged, _ = services.stage_import('{"name": "mcp__github__create_issue", "description": "Create a GitHub issue now"}\n'
                                      '{"name": "mcp__jira__create_ticket", "description": "Create a Jira ticket"}\n')
    services.commit_import(staged)
    assert agrees() and Tool.objects.filter(name="mcp__jira__create_ticket").exists()
    catalog = adapter.engine_catalog()
    assert catalog.get("mcp__github__create_issue").content_hash == tool_to_engine(
        Tool.objects.get(name="mcp__github__create_issue")).content_hash


def test_a_stored_index_is_read_in_postgresqls_binary_format(db):
    """Django's cursors bind on the client and read a bytea as hex text (twice its size, encoded and
    decoded); the store reads it as binary, past them: same bytes, no query through Django's cursor."""
    from django.db import connection

    from playground.registry.vectors import DatabaseIndexStore

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: other databases are read through the ORM")
    store = DatabaseIndexStore()
    blob = bytes(range(256)) * 4096 + b"\x00end"
    store.put("blob", blob)
    through_django: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *rest: through_django.append(sql) or execute(sql, *rest)):
        assert store.get("blob") == blob
        assert store.get("missing") is None
    assert through_django == []
