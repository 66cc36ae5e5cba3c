"""The scale path on PostgreSQL: full-text search (built in) and pgvector (optional extension).

When a deployment already runs PostgreSQL, the tool index can live there instead of in each
worker's memory: one table per deployment, rows keyed by (scope, tool name), synced by content
hash — a sync writes only tools that are new or changed and deletes removed ones. Ranking:
  - full text: a weighted `tsvector` (A: name parts, B: description, hint and server, C: schema)
    with a GIN index, ranked by `ts_rank_cd` against an OR query of the analysed terms;
  - vectors, when `CREATE EXTENSION vector` succeeds: an `embedding vector(384)` column with an
    HNSW cosine index, filled from the same embedding cache as the semantic backend, and fused with
    the full-text rank the way the hybrid backend fuses (weighted, BM25-like side normalised).
No home-made index server: PostgreSQL does the indexing; this module only writes rows and SQL.
`required` terms keep the Claude Code rule exactly: they are checked in Python (the same
`RequiredTermFilter`) and passed to SQL as the allowed names.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.engine.search import language_gate, text
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution, number_option
from playground.engine.search.bm25 import REQUIRED_TERM_POINTS
from playground.engine.search.embedding_cache import embed_tools
from playground.engine.search.required import RequiredTermFilter
from playground.engine.search.semantic import SemanticBackend, query_text
from playground.engine.tools import Tool, ToolCatalog

logger = logging.getLogger(__name__)

DSN_ENV = "TOOLSEARCH_PG_DSN"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def default_dsn() -> str:
    """TOOLSEARCH_PG_DSN, else DATABASE_URL when it is PostgreSQL."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if dsn:
        return dsn
    database_url = os.environ.get("DATABASE_URL", "").strip()
    if database_url.startswith(("postgres://", "postgresql://")):
        return database_url
    raise ValueError(f"the postgres search backend needs {DSN_ENV} or a PostgreSQL DATABASE_URL")


@dataclass
class SyncStats:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    reembedded: int = 0  # same text, but its vector came from another model (or none): vector rewritten

    def describe(self) -> str:
        return (f"postgres sync: {self.inserted} inserted, {self.updated} updated, {self.deleted} deleted, "
                f"{self.unchanged} unchanged, {self.reembedded} re-embedded")


def _vector_literal(vector: np.ndarray) -> str:
    return json.dumps([float(x) for x in vector])


class PostgresToolIndex:
    """Tool rows of one scope in one table; `sync` touches only what changed."""

    def __init__(self, dsn: str, *, table: str = "toolsearch_tools", scope: str = "default", dim: int = 384):
        import psycopg

        if not _IDENTIFIER.match(table):
            raise ValueError(f"invalid table name {table!r}")
        self.table = table
        self.scope = scope
        self.dim = dim
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.has_vector = False
        self.vector_error = ""
        self.ensure_schema()

    def close(self) -> None:
        self.conn.close()

    def ensure_schema(self) -> None:
        with self.conn.cursor() as cur:
            try:
                cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self.has_vector = True
            except Exception as exc:  # noqa: BLE001 - not installed on this server, or no right to create it
                self.vector_error = str(exc).strip().splitlines()[0]
            vector_column = f", embedding vector({self.dim})" if self.has_vector else ""
            cur.execute(
                f"""CREATE TABLE IF NOT EXISTS {self.table} (
                    scope text NOT NULL,
                    name text NOT NULL,
                    position integer NOT NULL,
                    content_hash text NOT NULL,
                    document tsvector NOT NULL{vector_column},
                    PRIMARY KEY (scope, name))"""
            )
            cur.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_document ON {self.table} USING gin (document)")
            if self.has_vector:
                cur.execute("SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'embedding'", (self.table,))
                if cur.fetchone() is None:
                    cur.execute(f"ALTER TABLE {self.table} ADD COLUMN embedding vector({self.dim})")
                # which model's vector `embedding` holds: another model's (a new runtime or model
                # folder) must be replaced even when the tool's text did not change
                cur.execute(f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS embedded_with text")
                cur.execute(
                    f"CREATE INDEX IF NOT EXISTS {self.table}_embedding ON {self.table} USING hnsw (embedding vector_cosine_ops)"
                )

    def sync(self, tools: Sequence[Tool], embed: Callable[[list[Tool]], np.ndarray] | None = None, model_id: str = "") -> SyncStats:
        """Make the scope hold exactly `tools` (in this order); write only new or changed rows.
        With `embed`, a row whose vector is not `model_id`'s gets a new one, text unchanged or not."""
        stats = SyncStats()
        embedding = embed is not None and self.has_vector
        with self.conn.cursor() as cur:
            embedded_with = "embedded_with" if self.has_vector else "NULL"
            cur.execute(f"SELECT name, content_hash, position, {embedded_with} FROM {self.table} WHERE scope = %s", (self.scope,))
            existing = {name: (content_hash, position, model) for name, content_hash, position, model in cur.fetchall()}
            wanted = {t.name for t in tools}
            gone = [name for name in existing if name not in wanted]
            if gone:
                cur.execute(f"DELETE FROM {self.table} WHERE scope = %s AND name = ANY(%s)", (self.scope, gone))
                stats.deleted = len(gone)
            changed: list[tuple[int, Tool]] = []
            stale: list[tuple[int, Tool]] = []
            moved: list[tuple[int, str]] = []
            for position, tool in enumerate(tools):
                old = existing.get(tool.name)
                if old is None or old[0] != tool.content_hash:
                    changed.append((position, tool))
                elif embedding and old[2] != model_id:
                    stale.append((position, tool))
                elif old[1] != position:
                    moved.append((position, tool.name))
                else:
                    stats.unchanged += 1
            vectors = embed([t for _, t in changed + stale]) if (embedding and (changed or stale)) else None
            for n, (position, tool) in enumerate(changed):
                fields = text.tool_fields(tool)
                values = [
                    self.scope, tool.name, position, tool.content_hash,
                    " ".join(text.split_identifier(fields["name"])),
                    f"{fields['description']} {fields['search_hint']} {' '.join(text.split_identifier(fields['server']))}",
                    fields["schema"],
                ]
                vector_columns, vector_sql, vector_update = "", "", ""
                if vectors is not None:
                    values += [_vector_literal(vectors[n]), model_id]
                    vector_columns, vector_sql = ", embedding, embedded_with", ", %s::vector, %s"
                    vector_update = ", embedding = EXCLUDED.embedding, embedded_with = EXCLUDED.embedded_with"
                cur.execute(
                    f"""INSERT INTO {self.table} (scope, name, position, content_hash, document{vector_columns})
                        VALUES (%s, %s, %s, %s,
                                setweight(to_tsvector('english', %s), 'A') ||
                                setweight(to_tsvector('english', %s), 'B') ||
                                setweight(to_tsvector('english', %s), 'C'){vector_sql})
                        ON CONFLICT (scope, name) DO UPDATE SET position = EXCLUDED.position,
                            content_hash = EXCLUDED.content_hash, document = EXCLUDED.document{vector_update}""",
                    values,
                )
                if tool.name in existing:
                    stats.updated += 1
                else:
                    stats.inserted += 1
            if stale:
                assert vectors is not None
                cur.executemany(
                    f"UPDATE {self.table} SET embedding = %s::vector, embedded_with = %s, position = %s WHERE scope = %s AND name = %s",
                    [(_vector_literal(vectors[len(changed) + n]), model_id, p, self.scope, t.name) for n, (p, t) in enumerate(stale)],
                )
                stats.reembedded = len(stale)
            if moved:
                cur.executemany(f"UPDATE {self.table} SET position = %s WHERE scope = %s AND name = %s", [(p, self.scope, n) for p, n in moved])
                stats.unchanged += len(moved)
        return stats

    def fulltext(self, words: Sequence[str], limit: int, allowed: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(name, ts_rank_cd) of the best matches of any of the words, ties by catalog position."""
        terms = [w for w in dict.fromkeys(words) if w.isalnum()]
        if not terms:
            return []
        query = " | ".join(terms)
        sql = (
            f"SELECT name, ts_rank_cd(document, q) AS rank FROM {self.table}, to_tsquery('english', %s) q "
            f"WHERE scope = %s AND document @@ q"
        )
        params: list[Any] = [query, self.scope]
        if allowed is not None:
            sql += " AND name = ANY(%s)"
            params.append(list(allowed))
        sql += " ORDER BY rank DESC, position ASC LIMIT %s"
        params.append(limit)
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return [(name, float(rank)) for name, rank in cur.fetchall()]

    def nearest(self, vector: np.ndarray, limit: int, allowed: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(name, cosine similarity) of the nearest tools by pgvector."""
        if not self.has_vector:
            return []
        sql = (
            f"SELECT name, 1 - (embedding <=> %s::vector) AS similarity FROM {self.table} "
            f"WHERE scope = %s AND embedding IS NOT NULL"
        )
        params: list[Any] = [_vector_literal(vector), self.scope]
        if allowed is not None:
            sql += " AND name = ANY(%s)"
            params.append(list(allowed))
        sql += " ORDER BY embedding <=> %s::vector, position ASC LIMIT %s"
        params += [params[0], limit]
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return [(name, float(similarity)) for name, similarity in cur.fetchall()]


@dataclass
class PostgresIndexHandle:
    index: PostgresToolIndex
    tools: tuple[Tool, ...]
    positions: dict[str, int]
    required: RequiredTermFilter
    stats: SyncStats
    fused: bool = False  # pgvector cosine fused with the full-text rank

    def describe(self) -> str:
        """What an evaluation notes about this index: the rows the sync wrote, and whether pgvector is used."""
        vectors = "pgvector cosine fused" if self.fused else f"full text only ({self.index.vector_error or 'no vectors asked for'})"
        return f"{self.stats.describe()}; {vectors}"


class PostgresSearchBackend(SearchBackend):
    """Full-text search in PostgreSQL, fused with pgvector similarity when the extension exists."""

    name = "postgres"
    label = "PostgreSQL full text (+ pgvector)"
    description = "tsvector/ts_rank_cd with a GIN index; pgvector HNSW cosine when available; rows synced by content hash"
    depth = 100

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.dsn = options.get("dsn") or default_dsn()
        self.table = options.get("table", "toolsearch_tools")
        self.scope = options.get("scope", "default")
        self.fulltext_weight = number_option("postgres fulltext_weight", options.get("fulltext_weight", 0.2), 0, 100)
        self.semantic = None
        if options.get("vectors", True):
            try:
                self.semantic = SemanticBackend(**(options.get("semantic") or {}))
            except ValueError as exc:
                logger.info("postgres backend: no vectors (%s)", exc)

    def build_index(self, catalog: ToolCatalog) -> PostgresIndexHandle:
        index = PostgresToolIndex(self.dsn, table=self.table, scope=self.scope)
        tools = tuple(catalog.deferred)
        embed = None
        if self.semantic is not None and index.has_vector:
            semantic = self.semantic

            def embed(changed: list[Tool]) -> np.ndarray:
                return embed_tools(changed, semantic.encoder.encode, semantic.cache, model_id=semantic.encoder.model_id)[0]

        stats = index.sync(tools, embed, model_id=self.semantic.encoder.model_id if embed is not None else "")
        return PostgresIndexHandle(index, tools, {t.name: i for i, t in enumerate(tools)}, RequiredTermFilter.of(catalog), stats,
                                   fused=embed is not None)

    def rank(self, reading: QueryReading, handle: PostgresIndexHandle, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        mask = handle.required.mask(reading.required)
        allowed = [handle.tools[i].name for i in np.flatnonzero(mask)] if mask is not None else None
        if allowed is not None and not allowed:
            return []
        if not reading.required and not language_gate.has_words(query_text(reading)):
            return []  # digits and punctuation ask for nothing (as hybrid and semantic answer them)
        words = [w for term in reading.scoring_terms for w in text.words(term) if w not in text.STOPWORDS]
        lexical = dict(handle.index.fulltext(words, self.depth, allowed))
        dense: dict[str, float] = {}
        if self.semantic is not None and handle.index.has_vector:
            dense = dict(handle.index.nearest(self.semantic.embed_query(query_text(reading)), self.depth, allowed))
            # pgvector answers any text with its nearest tools, gibberish included: the semantic
            # backend's gate decides whether cosine alone may answer (full text found nothing).
            if dense and not lexical and not language_gate.dense_may_answer(
                max(dense.values()), False, self.semantic.reads_as_language(reading), language_gate.has_words(query_text(reading))
            ):
                dense = {}
        top = max(lexical.values(), default=0.0)
        scores: dict[str, tuple[float, float]] = {}
        for name in set(lexical) | set(dense):
            lexical_part = (self.fulltext_weight if dense else 1.0) * (lexical.get(name, 0.0) / top if top > 0 else 0.0)
            dense_part = max(dense.get(name, 0.0), 0.0)
            scores[name] = (lexical_part, dense_part)
        if allowed is not None:
            for name in allowed:
                scores.setdefault(name, (0.0, 0.0))
        bonus = REQUIRED_TERM_POINTS * len(reading.required)
        ranked = sorted(
            ((sum(parts) + bonus, handle.positions[name], name, parts) for name, parts in scores.items()),
            key=lambda item: (-item[0], item[1]),
        )
        results: list[ScoredTool] = []
        for score, _, name, (lexical_part, dense_part) in ranked[:max_results]:
            if score <= 0:
                continue
            breakdown = [
                TermContribution(
                    term=" ".join(words), rule="postgres full-text rank", points=round(lexical_part, 4), field="tsvector",
                    detail=f"ts_rank_cd {lexical.get(name, 0.0):.4f} (A name, B description/hint/server, C schema), normalised",
                )
            ]
            if dense:
                breakdown.append(
                    TermContribution(term="(dense)", rule="pgvector cosine", points=round(dense_part, 4), field="embedding",
                                     detail=f"cosine {dense.get(name, 0.0):.3f}")
                )
            breakdown += [
                TermContribution(term=t, rule="required term matched", points=REQUIRED_TERM_POINTS, field="name/description/search_hint")
                for t in reading.required
            ]
            results.append(ScoredTool(name=name, score=round(score, 4), breakdown=breakdown))
        return results
