"""A fresh web process's first hybrid search over a 100,000-tool catalog held in PostgreSQL, the way
the web app gets it: the catalog from the registry's rows, the prebuilt indexes from `StoredSearchIndex`,
the vectors from `registry_toolembedding`, the search through the inspector's service
(`previews.inspect_query`: the permission filter, the turn plan and `run_tool_search`, the code a
conversation turn runs too).

    DB=postgres://postgres@127.0.0.1:5432/first_search_100k
    DATABASE_URL=$DB .venv/bin/python scripts/bench_web_first_search.py prepare [--size 100000]
    DATABASE_URL=$DB .venv/bin/python scripts/bench_web_first_search.py build [--code WORKTREE]
    DATABASE_URL=$DB .venv/bin/python scripts/bench_web_first_search.py compare OLD_WORKTREE NEW_WORKTREE [--runs 3]
    DATABASE_URL=$DB .venv/bin/python scripts/bench_web_first_search.py drop

`prepare` creates the database named by DATABASE_URL (dropping one of that name first: give it a
scratch name), migrates it, imports the catalog grown from ../shared/toolsets as `bench` grows it
(`scorer.scaled_catalog`) through the registry's import service, and stores every tool's vector as
the background build would have (the 5,789 real tools encoded, or read from the engine's file cache;
a replica gets its original's vector, as the speed bench does: loading does not depend on the values).
`build` runs the background index build in a process of WORKTREE's code (default: this one) by calling
the Celery task's function directly: nothing is left to encode, so it stores that code's prebuilt
indexes. Build once per code version to compare (the index keys name the code's format; the newest
12 are kept). `compare` runs `search` in fresh processes of each worktree, alternated (old, new, old,
new …): the first search's wall and CPU time, then the bench's 40 natural and 40 keyword queries
through the same path, whose top 5 must be the same for both versions. `drop` drops the database.
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

ROOT = Path(__file__).resolve().parent.parent
QUERY = "Find the latest bitcoin price and save it in a markdown file called bitcoin.md"

# Run in a fresh process of the worktree given (sys.argv[1]); prints one JSON line. Only names that
# the older code has too.
SEARCH = """
import json, os, sys, time
started_process = time.perf_counter()
sys.path.insert(0, sys.argv[1])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
import django
django.setup()
from playground.registry import previews, tasks
tasks.build_search_index_task.delay = lambda version: None  # measure, never queue
setup_s = time.perf_counter() - started_process
started, cpu = time.perf_counter(), time.process_time()
answer = previews.inspect_query(sys.argv[2])
first_s, first_cpu = time.perf_counter() - started, time.process_time() - cpu
started = time.perf_counter()
second = previews.inspect_query("create an issue in a github repository")
second_ms = (time.perf_counter() - started) * 1000
tops = {}
started = time.perf_counter()
for query in json.loads(sys.argv[3]):
    try:
        tops[query] = previews.inspect_query(query).result.matches[:5]
    except ValueError as exc:  # a request over the inspector's size limits: the page says so
        tops[query] = str(exc)
queries_s = time.perf_counter() - started
# The pass above warmed every per-process cache (and gave the int8 scanner time to be built): a second
# pass times each natural-language request, as a warm web process answers it.
natural_ms, natural_cpu_ms = [], []
for query in json.loads(sys.argv[3])[: int(sys.argv[4])]:
    started, cpu = time.perf_counter(), time.process_time()
    try:
        previews.inspect_query(query)
    except ValueError:
        continue
    natural_ms.append((time.perf_counter() - started) * 1000)
    natural_cpu_ms.append((time.process_time() - cpu) * 1000)
print(json.dumps({"setup_s": round(setup_s, 2), "first_search_s": round(first_s, 2), "first_search_cpu_s": round(first_cpu, 2),
                  "index_state": answer.result.index_state or "complete", "top": answer.result.matches[:5],
                  "second_search_ms": round(second_ms, 1), "queries_s": round(queries_s, 1), "tops": tops,
                  "natural_ms": natural_ms, "natural_cpu_ms": natural_cpu_ms}))
"""

BUILD = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
import django
django.setup()
from playground.registry import index_builds, indexing, tasks
from playground.registry.models import SearchIndexBuild
tasks.build_search_index_task.delay = lambda version: None  # called below, as a worker would
row = indexing.schedule_index_build()
if row.status != SearchIndexBuild.Status.QUEUED:  # built before (by another code version): again
    row.status = SearchIndexBuild.Status.QUEUED
    row.save(update_fields=["status", "updated_at"])
started, cpu = time.perf_counter(), time.process_time()
result = tasks.build_search_index_task(row.version)
print(json.dumps({**result, "build_s": round(time.perf_counter() - started, 1), "build_cpu_s": round(time.process_time() - cpu, 1)}))
"""


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()


def _admin_url() -> tuple[str, str]:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database (postgres://…/NAME): prepare creates it, drop drops it")
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path="/postgres")), parsed.path.lstrip("/")


def prepare(size: int) -> None:
    import psycopg

    admin, name = _admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "fill", "--size", str(size)], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    print(out.stdout.strip(), f"({time.perf_counter() - started:.0f} s)")


def fill(size: int) -> None:
    """The catalog imported through the import service, and every deferred tool's vector stored."""
    _setup_django()
    from playground.bench.scorer import scaled_catalog, source_tools
    from playground.bench.search_speed import _original_key
    from playground.engine.catalog_io import dump_tools, toolsets_dir
    from playground.engine.search.embedding_cache import EmbeddingCache, default_cache_path, embed_tools, embedding_key
    from playground.engine.search.semantic import dense_side
    from playground.engine.search.text import tool_document
    from playground.registry import adapter, backends, services, tasks

    base = source_tools(toolsets_dir())
    grown = scaled_catalog(base, size)
    tasks.build_search_index_task.delay = lambda version: None  # `build` runs it
    staged, _ = services.stage_import(dump_tools(list(grown.tools), "jsonl"))
    imported = services.commit_import(staged)["new"]
    dense = dense_side(backends.search_backend(""))
    catalog = adapter.engine_catalog()
    deferred = catalog.deferred
    include_server = dense.include_server(deferred)
    model_id = dense.encoder.model_id
    originals = [tool for tool in base if tool.name in catalog]
    file_cache = EmbeddingCache(default_cache_path(), dense.encoder.dim)  # the real tools' vectors, encoded once per host
    vectors, stats = embed_tools(originals, dense.encoder.encode, file_cache, model_id=model_id)
    by_text: dict = {}
    for tool, vector in zip(originals, vectors):
        by_text.setdefault(_original_key(tool), vector)
    store = backends.vector_store()
    items = {embedding_key(model_id, tool_document(tool, include_server=include_server)): by_text[_original_key(tool)]
             for tool in deferred if _original_key(tool) in by_text}
    keys = list(items)
    for start in range(0, len(keys), 5000):
        store.put_many({key: items[key] for key in keys[start : start + 5000]}, model_id=model_id)
    print(json.dumps({"imported": imported, "deferred": len(deferred), "vectors": len(items), "encoded": stats.encoded}))


def build(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BUILD, code], cwd=code, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"build in {code} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def search(code: str, queries: list[str], natural: int) -> dict:
    out = subprocess.run([sys.executable, "-c", SEARCH, code, QUERY, json.dumps(queries), str(natural)], cwd=code,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"search in {code} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_queries(count: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from playground.bench.scorer import keyword_queries, natural_queries, source_tools
    from playground.engine.catalog_io import toolsets_dir

    return natural_queries(toolsets_dir(), count) + keyword_queries(source_tools(toolsets_dir()), count)


def _percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95 (nearest rank) of the warm natural requests' times."""
    ordered = sorted(values) or [float("nan")]
    return statistics.median(ordered), ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(versions: dict[str, str], runs: int, count: int) -> None:
    queries = bench_queries(count)
    results: dict[str, list[dict]] = {name: [] for name in versions}
    for n in range(runs):
        for name, code in versions.items():
            before = load()
            result = search(code, queries, count)
            results[name].append(result)
            p50, p95 = _percentiles(result["natural_ms"])
            cpu50, cpu95 = _percentiles(result["natural_cpu_ms"])
            print(f"run {n + 1} {name}: first search {result['first_search_s']} s wall, {result['first_search_cpu_s']} s CPU, "
                  f"second {result['second_search_ms']} ms, warm natural p50 {p50:.1f} / p95 {p95:.1f} ms "
                  f"(CPU {cpu50:.1f} / {cpu95:.1f} ms), "
                  f"[{result['index_state']}] top {result['top'][:2]} (load average before {before}, after {load()})", flush=True)
    print(f"\n| first hybrid search, fresh process ({len(results[next(iter(versions))][0]['tops'])} queries checked) "
          "| wall s, median (runs) | CPU s, median (runs) | second search ms (runs) | warm natural p50 / p95 ms (runs) "
          "| their CPU ms (runs) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        walls, cpus = [r["first_search_s"] for r in rows], [r["first_search_cpu_s"] for r in rows]
        warm = ", ".join("{:.1f} / {:.1f}".format(*_percentiles(r["natural_ms"])) for r in rows)
        warm_cpu = ", ".join("{:.1f} / {:.1f}".format(*_percentiles(r["natural_cpu_ms"])) for r in rows)
        print(f"| {name} ({versions[name]}) | {statistics.median(walls):.2f} ({', '.join(map(str, walls))}) "
              f"| {statistics.median(cpus):.2f} ({', '.join(map(str, cpus))}) | {', '.join(str(r['second_search_ms']) for r in rows)} "
              f"| {warm} | {warm_cpu} |")
    reference = results[next(iter(versions))][0]["tops"]
    for name, rows in results.items():
        for row in rows:
            differing = [q for q in reference if row["tops"].get(q) != reference[q]]
            if differing:
                print(f"{name}: top 5 differs for {len(differing)} queries, e.g. {differing[0]!r}: {row['tops'].get(differing[0])} "
                      f"against {reference[differing[0]]}")
    print(f"same top 5 checked over {len(reference)} queries for every run; load average now {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="phase", required=True)
    for name in ("prepare", "fill"):
        sub.add_parser(name).add_argument("--size", type=int, default=100_000)
    sub.add_parser("build").add_argument("--code", default=str(ROOT))
    one = sub.add_parser("search")
    one.add_argument("--code", default=str(ROOT))
    one.add_argument("--queries", type=int, default=40)
    both = sub.add_parser("compare")
    both.add_argument("old")
    both.add_argument("new")
    both.add_argument("--runs", type=int, default=3)
    both.add_argument("--queries", type=int, default=40, help="natural and keyword queries each, whose top 5 are compared")
    sub.add_parser("drop")
    args = parser.parse_args()
    if args.phase == "prepare":
        prepare(args.size)
    elif args.phase == "fill":
        fill(args.size)
    elif args.phase == "build":
        print(json.dumps(build(args.code)))
    elif args.phase == "search":
        result = search(args.code, bench_queries(args.queries), args.queries)
        print(json.dumps({k: v for k, v in result.items() if k != "tops"}))
    elif args.phase == "compare":
        compare({"old": args.old, "new": args.new}, args.runs, args.queries)
    else:
        import psycopg

        admin, name = _admin_url()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
