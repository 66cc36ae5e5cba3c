"""The PostgreSQL scale path: full-text search always (PostgreSQL has it built in), pgvector where
`CREATE EXTENSION vector` succeeds (skipped with the server's reason otherwise)."""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from playground.engine.search.backends import get_backend
from playground.engine.tools import ToolCatalog
from tests.conftest import IN_CI, require_service
from tests.search.conftest import mcp

pytestmark = pytest.mark.postgres


def _dsn() -> str:
    """TOOLSEARCH_PG_DSN, else the server of DATABASE_URL (its always-present `postgres` database:
    the app database itself may not exist yet when tests start), else the local server."""
    from psycopg.conninfo import make_conninfo

    if os.environ.get("TOOLSEARCH_PG_DSN"):
        return os.environ["TOOLSEARCH_PG_DSN"]
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        return make_conninfo(url.replace("postgres://", "postgresql://", 1), dbname="postgres")
    return "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_table():
    import psycopg

    dsn = _dsn()
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.OperationalError:
        require_service(False, f"PostgreSQL at {dsn}")
    table = f"toolsearch_test_{uuid.uuid4().hex[:10]}"
    yield dsn, table
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_sync_writes_only_what_changed(pg_table, small_catalog):
    from playground.engine.search.postgres import PostgresToolIndex

    dsn, table = pg_table
    index = PostgresToolIndex(dsn, table=table)
    tools = list(small_catalog.deferred)
    first = index.sync(tools)
    assert (first.inserted, first.updated, first.deleted, first.unchanged) == (len(tools), 0, 0, 0)
    again = index.sync(tools)
    assert (again.inserted, again.updated, again.deleted, again.unchanged) == (0, 0, 0, len(tools))
    changed = [t for t in tools if t.name not in {"mcp__weather__get_alerts", "mcp__mail__send_email"}]
    changed += [mcp("weather", "get_alerts", "Severe weather alerts, now worldwide."), mcp("notes", "add_note", "Add a note")]
    synced = index.sync(changed)
    assert (synced.inserted, synced.updated, synced.deleted) == (1, 1, 1)
    index.close()


def test_fulltext_ranks_and_keeps_the_special_forms(pg_table, small_catalog):
    dsn, table = pg_table
    backend = get_backend("postgres", dsn=dsn, table=table, vectors=False)
    assert backend.search("weather forecast for a city", small_catalog).matches[0] == "mcp__weather__get_forecast"
    assert backend.search("create an issue", small_catalog).matches[0] == "mcp__github__create_issue"
    top = backend.search("sending emails", small_catalog).scored[0]
    assert top.name == "mcp__mail__send_email" and top.breakdown[0].rule == "postgres full-text rank"
    cc = get_backend("claude-code")
    for query in ("+github", "+file +new", "select:mcp__time__convert_time", "mcp__github", "NotebookEdit"):
        ours, theirs = backend.search(query, small_catalog, max_results=50), cc.search(query, small_catalog, max_results=50)
        assert set(ours.matches) == set(theirs.matches), query
    assert backend.search("zebra unicorn", small_catalog).matches == []


def test_ties_keep_catalog_order(pg_table):
    dsn, table = pg_table
    catalog = ToolCatalog([mcp("a", f"tool_{i}", "identical text about widgets") for i in range(6)])
    backend = get_backend("postgres", dsn=dsn, table=table, vectors=False)
    assert backend.search("widgets", catalog, max_results=4).matches == [f"mcp__a__tool_{i}" for i in range(4)]


@pytest.fixture(scope="session")
def bundled_postgres():
    """PostgreSQL 16 with pgvector from the `pgserver` wheel (the dev extra), on a socket in a
    temporary folder, stopped and deleted at the end of the session."""
    try:
        import pgserver
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"the dev extra (pgserver) is required under CI=true: {exc}")
        pytest.skip(f"pgserver is not installed: {exc}")
    # Not under pytest's base folder: that is private to its owner (0700), and as root pgserver runs
    # PostgreSQL as a user of its own, who must reach the data folder and write its log there.
    folder = Path(tempfile.mkdtemp(prefix="toolsearch-pgserver-"))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


def _pgvector_dsn(pg_table, request) -> str:
    """The configured PostgreSQL when it has pgvector, else the bundled PostgreSQL + pgvector."""
    from playground.engine.search.postgres import PostgresToolIndex

    dsn, table = pg_table
    probe = PostgresToolIndex(dsn, table=table)
    has_vector, reason = probe.has_vector, probe.vector_error
    probe.close()
    if not has_vector:
        dsn = request.getfixturevalue("bundled_postgres")
    index = PostgresToolIndex(dsn, table=table)
    assert index.has_vector, f"pgvector is not available (configured server: {reason}; bundled: {index.vector_error})"
    index.close()
    return dsn


def test_pgvector_similarity(pg_table, small_catalog, encoder, embeddings_dir, request):
    import psycopg

    dsn, table = _pgvector_dsn(pg_table, request), pg_table[1]
    backend = get_backend("postgres", dsn=dsn, table=table)
    # Dense evidence only: no query word occurs in the forecast tool's text.
    result = backend.search("is it going to rain tomorrow", small_catalog)
    assert result.matches[0] == "mcp__weather__get_forecast"
    top = result.scored[0]
    cosine = next(c for c in top.breakdown if c.rule == "pgvector cosine")
    assert cosine.points > 0
    with psycopg.connect(dsn) as conn:
        kinds = {row[0] for row in conn.execute(
            "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
            "WHERE i.indrelid = %s::regclass", (table,))}
    assert "hnsw" in kinds and "gin" in kinds, kinds
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_vectors_of_another_model_are_replaced_though_the_text_is_the_same(pg_table, small_catalog, request):
    """A new encoder (runtime or model folder) must not leave the old model's vectors in the table."""
    import numpy as np
    import psycopg

    from playground.engine.search.postgres import PostgresToolIndex

    dsn, table = _pgvector_dsn(pg_table, request), pg_table[1]
    tools = list(small_catalog.deferred)
    calls: list[list[str]] = []

    def embedder(value: float):
        def embed(changed):
            calls.append([t.name for t in changed])
            return np.full((len(changed), 384), value, dtype=np.float32)
        return embed

    index = PostgresToolIndex(dsn, table=table)
    plain = index.sync(tools)  # no vectors yet (e.g. the semantic extra was missing)
    assert plain.inserted == len(tools) and calls == []
    filled = index.sync(tools, embedder(1.0), model_id="model-a")
    assert (filled.reembedded, filled.inserted, filled.updated) == (len(tools), 0, 0) and len(calls[-1]) == len(tools)
    assert index.sync(tools, embedder(1.0), model_id="model-a").unchanged == len(tools) and len(calls) == 1
    swapped = index.sync(list(reversed(tools)), embedder(-1.0), model_id="model-b")
    assert swapped.reembedded == len(tools) and len(calls) == 2
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT name, position, embedded_with, embedding::text FROM {table}").fetchall()
    assert {model for _, _, model, _ in rows} == {"model-b"}
    assert all(vector.startswith("[-1,") for _, _, _, vector in rows)
    assert sorted((position, name) for name, position, _, _ in rows) == list(enumerate(t.name for t in reversed(tools)))
    assert index.sync(list(reversed(tools))).unchanged == len(tools)  # without an encoder the vectors stay
    index.close()


def test_no_postgres_configured_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TOOLSEARCH_PG_DSN", raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:///x.sqlite3")
    with pytest.raises(ValueError, match="TOOLSEARCH_PG_DSN"):
        get_backend("postgres")


def test_postgres_runs_in_the_evaluation_suite_and_says_what_it_synced(pg_table, tmp_path):
    """`eval --toolsets … --backends postgres` used to stop with AttributeError ('SyncStats' object
    has no attribute 'encoded'): the suite read every index's stats as embedding counts."""
    from playground.engine.search import quality
    from tests.toolset_fixtures import write_toy_toolsets

    dsn, table = pg_table
    root = write_toy_toolsets(tmp_path)
    options = {"postgres": {"dsn": dsn, "table": table, "vectors": False}}
    results = quality.run_suite(["toy"], ["postgres", "bm25"], split="all", root=root, backend_options=options)
    postgres = [r for r in results if r.backend == "postgres"]
    assert [r.style for r in postgres] == ["natural", "keyword"] and all(r.queries == 12 for r in postgres)
    assert postgres[0].metrics["recall@1"] == 1.0
    assert "postgres sync: 3 inserted, 0 updated, 0 deleted, 0 unchanged" in postgres[0].notes
    assert "full text only" in postgres[0].notes and "embeddings:" not in postgres[0].notes
    # a second run finds the rows in place
    again = quality.run_suite(["toy"], ["postgres"], split="all", styles=["natural"], root=root, backend_options=options)
    assert "postgres sync: 0 inserted, 0 updated, 0 deleted, 3 unchanged" in again[0].notes


def test_nonsense_gets_no_match_though_pgvector_always_has_neighbours(pg_table, small_catalog, request):
    """pgvector returns the nearest tools of any text; the semantic backend's gate decides whether
    cosine alone may answer, so keyboard mashes and digits get "no match" as with every other backend."""
    from playground.engine.search import quality

    dsn, table = _pgvector_dsn(pg_table, request), pg_table[1]
    backend = get_backend("postgres", dsn=dsn, table=table)
    assert backend.search("is it going to rain tomorrow", small_catalog).matches  # a request with no shared word: answered
    for nonsense in ("zzzz qqqq", "asdfgh jkl", "12345 67890", "!!!! ????"):
        assert backend.search(nonsense, small_catalog).matches == [], nonsense
    assert quality.nonsense_no_match(backend, small_catalog) == 1.0


def test_a_tool_named_in_the_request_ranks_first_in_postgres_too(pg_table):
    from playground.engine.search.mentions import MENTION_RULE

    dsn, table = pg_table
    catalog = ToolCatalog([
        mcp("code", "search_code", "Find a symbol in code: find symbol definitions, symbol references, any symbol."),
        mcp("lsp", "find_symbol", "Locate a declaration by its identifier."),
    ])
    backend = get_backend("postgres", dsn=dsn, table=table, vectors=False)
    for query in ("find symbol definitions", "run find_symbol on Parser", "mcp__lsp__find_symbol Parser"):
        top = backend.search(query, catalog).scored[0]
        assert top.name == "mcp__lsp__find_symbol" and top.breakdown[-1].rule == MENTION_RULE, query
