"""A fresh process's first hybrid search over a grown catalog, engine only (no Django, no database).

    .venv/bin/python scripts/bench_first_search.py prepare DIR [--size 100000]   # once per code version
    .venv/bin/python scripts/bench_first_search.py search DIR [--size 100000]    # one fresh process, prints JSON

`prepare` grows the catalog from ../shared/toolsets as `bench` grows it (`benchmark.scaled_catalog`),
gives every tool its vector in a SQLite vector store (a replica takes its original's vector, as the
speed bench does: what is measured is loading, not the values), builds the default backend's index
and stores its prebuilt indexes in DIR (one file per key), as the background build does in the web app.

`search` is a process after a deploy: it grows the same catalog (not timed: the web app reads it from
its database), then times making the backend and its first search through `IndexedOrFallback`
(index state, prebuilt indexes loaded from DIR, vectors from the store, the query encoded), and a
second search. Run it alternately for two worktrees (old and new code), each with its own DIR,
to compare: the prebuilt indexes are written by the code that reads them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
QUERY = "Find the latest bitcoin price and save it in a markdown file called bitcoin.md"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["prepare", "search"])
    parser.add_argument("folder")
    parser.add_argument("--size", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)

    try:  # the bench's home since it left the engine; the older code (a second worktree) had it there
        from playground.bench.scorer import scaled_catalog, source_tools
    except ImportError:
        from playground.engine.benchmark import scaled_catalog, source_tools
    from playground.engine.catalog_io import toolsets_dir
    from playground.engine.search import stored
    from playground.engine.search.embedding_cache import EmbeddingCache, SqliteVectorStore

    class FileIndexStore(stored.IndexStore):
        def _path(self, key: str) -> Path:
            return folder / f"{hashlib.sha1(key.encode()).hexdigest()}.index"

        def get(self, key: str) -> bytes | None:
            path = self._path(key)
            return path.read_bytes() if path.exists() else None

        def put(self, key: str, data: bytes) -> None:
            self._path(key).write_bytes(data)

    base = source_tools(toolsets_dir())
    catalog = scaled_catalog(base, args.size)
    _ = catalog.fingerprint
    vector_store = SqliteVectorStore(folder / "vectors.sqlite3")

    def backend():
        from playground.engine.search.hybrid import HybridBackend

        built = HybridBackend()
        built.semantic.cache = EmbeddingCache(None, built.semantic.encoder.dim, store=vector_store)
        stored.use_index_store(built, FileIndexStore())
        return built

    if args.phase == "prepare":
        try:
            from playground.bench.search_speed import prefill_embeddings
        except ImportError:
            from playground.engine.search.speed import prefill_embeddings

        builder = backend()
        prefill_embeddings(builder, catalog, base)  # a memory cache holding every tool's vector
        memory = builder.semantic.cache
        keys = builder.semantic.tool_keys(catalog)
        found = memory.get_many(keys)
        vector_store.put_many(found, model_id=builder.semantic.encoder.model_id)
        builder = backend()
        started = time.perf_counter()
        written = stored.save_indexes(builder, catalog, FileIndexStore())
        print(json.dumps({"tools": len(catalog), "vectors": len(found), "stored": written, "build_s": round(time.perf_counter() - started, 1)}))
        return

    from playground.engine.search.indexed import IndexedOrFallback
    from playground.engine.search.keyword import ClaudeCodeKeywordBackend

    started, cpu = time.perf_counter(), time.process_time()
    wrapped = IndexedOrFallback(backend(), ClaudeCodeKeywordBackend())
    result = wrapped.search(QUERY, catalog, max_results=5)
    first_s, first_cpu = time.perf_counter() - started, time.process_time() - cpu
    started = time.perf_counter()
    again = wrapped.search("create an issue in a github repository", catalog, max_results=5)
    second_ms = (time.perf_counter() - started) * 1000
    print(json.dumps({"tools": len(catalog), "first_search_s": round(first_s, 2), "first_search_cpu_s": round(first_cpu, 2),
                      "index_state": result.index_state, "matches": result.matches, "second_search_ms": round(second_ms, 1),
                      "second_matches": again.matches}))


if __name__ == "__main__":
    main()
