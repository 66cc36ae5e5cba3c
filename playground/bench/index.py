"""The search index off the request path, measured: the first inspector search after importing a
catalog, with the vectors built in the background against encoding them in the request, and a fresh
process's first hybrid search loading stored vectors.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/playground \\
        .venv/bin/python -m playground.bench.index [--sizes 10000,50000,100000] [--runs 3] [--inline-runs 1]

Works in a database of its own (`<name>_bench_index`, created and dropped; SQLite: a file beside the
configured one). Each size: the catalog grown from ../shared/toolsets as `bench` grows it
(`scorer.scaled_catalog`), imported through the registry's import service; then each figure is
taken in a fresh Python process (its own memory: no vector, catalog or index cached), as a web
process or a worker after a deploy:
  - inline:   TOOLSEARCH_VECTOR_STORE=memory, the behaviour before: the first search encodes every tool;
  - fallback: the default (database store, background build) before the build ran: the first search;
  - build:    the background task (`indexing.build_index`) encoding the missing vectors and storing
              the prebuilt indexes (`indexing.store_indexes`), as a worker;
              with --synthetic-above N, sizes above N get random unit vectors under the real keys
              instead (what loading costs does not depend on the values; encoding 100,000 texts
              would take ~10 minutes here);
  - loaded:   the first search once the vectors and indexes are stored: load them from the database,
              rank (split into "load" and the whole request).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
QUERY = "create an issue in a github repository"


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()


def bench_url(url: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=parsed.path.rstrip("/") + "_bench_index"))


# -- phases, each run in its own process -----------------------------------------------------------
def phase_reset(size: int) -> dict:
    """Empty database, migrated; the catalog imported through the import service."""
    _setup_django()
    from django.core.management import call_command

    from playground.bench.scorer import scaled_catalog, source_tools
    from playground.engine.catalog_io import dump_tools, toolsets_dir
    from playground.registry import services, tasks

    call_command("flush", interactive=False, verbosity=0)
    base = source_tools(toolsets_dir())  # $TOOLSETS_DIR, else the shared/toolsets beside the repository
    catalog = scaled_catalog(base, size)
    queued: list[str] = []
    tasks.build_search_index_task.delay = queued.append  # the worker phase runs it, timed
    started = time.perf_counter()
    staged, preview = services.stage_import(dump_tools(list(catalog.tools), "jsonl"))
    summary = services.commit_import(staged)
    return {"imported": summary["new"], "import_s": round(time.perf_counter() - started, 1), "queued": queued}


def phase_search() -> dict:
    """A fresh process's first inspector request (full page, default backend)."""
    _setup_django()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from playground.registry import adapter, backends, tasks

    setup_test_environment()  # the test client needs it (ALLOWED_HOSTS testserver)
    tasks.build_search_index_task.delay = lambda version: None
    user, _ = get_user_model().objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)
    load_s = None
    backend = backends.search_backend("")
    started, load_cpu = time.perf_counter(), time.process_time()
    if hasattr(backend, "missing_vectors"):
        catalog, _ = adapter.filtered_catalog(None)
        missing = backend.missing_vectors(catalog)
        load_s = time.perf_counter() - started
    else:
        missing = None
    started = time.perf_counter()
    response = client.get(reverse("registry:inspector"), {"q": QUERY})
    request_s = time.perf_counter() - started
    cpu_s = time.process_time() - load_cpu  # CPU time of the process for both: less moved by other load
    result = response.context["answer"].result
    return {"request_s": round(request_s + (load_s or 0), 2), "load_s": None if load_s is None else round(load_s, 2),
            "cpu_s": round(cpu_s, 2),
            "missing": missing, "index_state": result.index_state or "complete", "top": result.matches[:1]}


def phase_build(synthetic: bool) -> dict:
    _setup_django()
    import numpy as np

    from playground.registry import adapter, backends, index_builds, indexing
    from playground.registry.models import SearchIndexBuild

    started = time.perf_counter()
    if synthetic:
        dense = backends.search_backend("").semantic
        keys = dense.tool_keys(adapter.filtered_catalog(None)[0])
        rng = np.random.default_rng(0)
        store = backends.vector_store()
        for start in range(0, len(keys), 2000):
            chunk = keys[start : start + 2000]
            vectors = rng.standard_normal((len(chunk), dense.encoder.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.put_many(dict(zip(chunk, vectors)), model_id=dense.encoder.model_id)
        vectors_s = time.perf_counter() - started
        indexing.store_indexes()  # what the real build does last
        row = index_builds.current_build()
        if row is not None:  # every vector and index stored: the build is done (a worker would redo nothing)
            row.status, row.total, row.embedded = SearchIndexBuild.Status.DONE, len(keys), len(keys)
            row.save(update_fields=["status", "total", "embedded", "updated_at"])
        return {"build_s": round(time.perf_counter() - started, 1), "synthetic": len(keys),
                "store_indexes_s": round(time.perf_counter() - started - vectors_s, 1)}
    row = indexing.schedule_index_build() or SearchIndexBuild.objects.first()
    row = indexing.build_index(row.version)
    return {"build_s": round(time.perf_counter() - started, 1), "status": row.status, "encoded": row.encoded, "total": row.total}


# -- the driver ----------------------------------------------------------------------------------
def run(phase: list[str], env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "playground.bench.index", "--phase", *phase], env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"phase {phase} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", nargs="+")
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--inline-runs", type=int, default=1, help="runs of the inline (before) figure, at the first size only")
    parser.add_argument("--synthetic-above", type=int, default=10_000)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        result = {"reset": lambda: phase_reset(int(rest[0])), "search": phase_search,
                  "build": lambda: phase_build(rest == ["synthetic"])}[name]()
        print(json.dumps(result))
        return

    configured = os.environ.get("DATABASE_URL", "")
    if not configured.startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (the bench creates <name>_bench_index there)")
    import psycopg

    url = bench_url(configured)
    name = urlparse(url).path.lstrip("/")
    admin = urlunparse(urlparse(configured)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "TOOLSEARCH_CACHE_DIR": os.environ.get("TOOLSEARCH_CACHE_DIR", "")}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)
    try:
        for n, size in enumerate(int(s) for s in args.sizes.split(",")):
            print(f"== {size:,} tools (load average {load()})", flush=True)
            imported = run(["reset", str(size)], env)
            print(f"import: {imported['imported']:,} new tools in {imported['import_s']} s; build queued: {bool(imported['queued'])}", flush=True)
            if n == 0:
                for _ in range(args.inline_runs):
                    inline = run(["search"], {**env, "TOOLSEARCH_VECTOR_STORE": "memory"})
                    print(f"  before (inline encoding) first search: {inline['request_s']} s [{inline['index_state']}] (load {load()})", flush=True)
                fallback = [run(["search"], env) for _ in range(args.runs)]
                print(f"  after, build not done: first search median {statistics.median(r['request_s'] for r in fallback)} s "
                      f"({', '.join(str(r['request_s']) for r in fallback)}) [{fallback[0]['index_state']}, top {fallback[0]['top']}] (load {load()})", flush=True)
            built = run(["build", "synthetic"] if size > args.synthetic_above else ["build"], env)
            print(f"  background build: {built} (load {load()})", flush=True)
            loaded = [run(["search"], env) for _ in range(args.runs)]
            print(f"  fresh process, vectors stored: first search median {statistics.median(r['request_s'] for r in loaded)} s "
                  f"({', '.join(str(r['request_s']) for r in loaded)}), CPU median {statistics.median(r['cpu_s'] for r in loaded)} s, of which loading vectors median "
                  f"{statistics.median(r['load_s'] for r in loaded)} s [{loaded[0]['index_state']}, top {loaded[0]['top']}] (load {load()})", flush=True)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
