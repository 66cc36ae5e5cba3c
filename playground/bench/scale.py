"""A large catalog end to end: its pages, its first search and a conversation streamed live over it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<a database holding the grown catalog> \\
        .venv/bin/python -m playground.bench.scale [--runs 3]            # in-process figures
    DATABASE_URL=... .venv/bin/python -m playground.bench.scale --stack    # the whole stack

Fill the database first with `python -m playground.bench.index`'s phases: `--phase reset 100000` (the catalog
grown from ../shared/toolsets as `bench` grows it, `scorer.scaled_catalog`: the real tools, then
replicas with a renamed `_rN` server and a marked description, imported through the registry's
import service), then `--phase build synthetic` (random unit vectors under the real keys, since
encoding 100,000 texts takes ~10 minutes here and loading does not depend on the values, then the
prebuilt indexes stored and the build marked done, as the background build ends).

Without `--stack`, each run is a fresh process (a web process after a deploy): the first hybrid
search (inspector, full page), "what the model sees" (its HTML bytes and time) and the process's
RSS after both.

With `--stack`, the load command's embedded stack (`playground.loadtest`: daphne and a Celery worker
with 2 pool processes, on this database, the Redis at REDIS_URL under a prefix of its own) runs one
demo-agent conversation watched over its WebSocket, as a person would, then serves "what the model
sees" and the inspector's first search over HTTP; it prints whether the conversation streamed to its
end, the largest frame, the page sizes and times, and each process's resident memory (now and peak)
after each step.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUERY = "create an issue in a github repository"


def _rss_mb() -> float:
    """The process's resident memory now (Linux), after a collection."""
    import gc

    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measure() -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from playground.registry import tasks
    from playground.registry.models import Tool

    setup_test_environment()
    tasks.build_search_index_task.delay = lambda version: None  # measure, never queue
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(user)
    started, cpu = time.perf_counter(), time.process_time()
    search = client.get(reverse("registry:inspector"), {"q": QUERY})
    search_s, search_cpu = time.perf_counter() - started, time.process_time() - cpu
    result = search.context["answer"].result
    started = time.perf_counter()
    model = client.get(reverse("registry:model_view"))
    model_s = time.perf_counter() - started
    return {
        "tools": Tool.objects.filter(enabled=True).count(),
        "first_search_s": round(search_s, 2), "first_search_cpu_s": round(search_cpu, 2),
        "index_state": result.index_state or "complete", "top": result.matches[:1],
        "model_view_status": model.status_code, "model_view_bytes": len(model.content), "model_view_s": round(model_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_mb": _rss_mb(),
    }


def measure_stack(workers: int, message: str, timeout: float) -> dict:
    """The embedded stack on the configured database: one conversation, the model view, one search."""
    import asyncio
    import urllib.parse

    from playground.loadtest.cli import run_level
    from playground.loadtest.client import Session
    from playground.loadtest.stack import EmbeddedStack

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    stack = EmbeddedStack(workers=workers, existing_database_url=os.environ["DATABASE_URL"], log=say)
    figures: dict = {"memory": {}}
    try:
        stack.start()
        figures["search_index_build"] = stack.wait_for_search_index()
        figures["memory"]["started"] = stack.memory_mb()
        session = Session(stack.base_url)
        session.login(stack.username, stack.password)
        started = time.perf_counter()
        results, wall = asyncio.run(run_level(session, 1, message, timeout))
        result = results[0]
        figures["conversation"] = {
            "completed": result.completed, "error": result.error, "events": len({s for s, _ in result.receipts}),
            "run_s": round(time.perf_counter() - started, 1), "largest_frame_bytes": result.largest_frame,
        }
        figures["memory"]["after_conversation"] = stack.memory_mb()
        for name, path in (("model_view", "/model/"), ("first_search", "/inspector/?" + urllib.parse.urlencode({"q": QUERY}))):
            started = time.perf_counter()
            status, _, body = session.request(path)
            figures[name] = {"status": status, "bytes": len(body.encode()), "s": round(time.perf_counter() - started, 2)}
            figures["memory"][f"after_{name}"] = stack.memory_mb()
        figures["first_search"]["index_state"] = "fallback" if "being built" in body or "not built yet" in body else "complete"
    finally:
        stack.stop(keep_log=False)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stack", action="store_true", help="the whole stack: a conversation streamed live, pages over HTTP")
    parser.add_argument("--workers", type=int, default=2, help="with --stack: Celery pool processes")
    parser.add_argument("--message", default="What is the weather forecast for Paris?")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    if args.stack:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        figures = measure_stack(args.workers, args.message, args.timeout)
        figures["load_average"] = {"before": load, "after": " / ".join(f"{x:.2f}" for x in os.getloadavg())}
        print(json.dumps(figures, indent=1))
        return
    if args.one:
        print(json.dumps(measure()))
        return
    runs = []
    for _ in range(args.runs):
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        out = subprocess.run([sys.executable, "-m", "playground.bench.scale", "--one"], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{json.dumps(runs[-1])} (load average before: {load})", flush=True)
    for key in ("first_search_s", "first_search_cpu_s", "model_view_bytes", "model_view_s", "peak_rss_mb", "rss_mb"):
        print(f"median {key}: {statistics.median(r[key] for r in runs)}")


if __name__ == "__main__":
    main()
