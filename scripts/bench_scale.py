"""A large catalog's pages and first search, measured in one fresh process (as a web process after a
deploy): the first hybrid search (inspector, full page), "what the model sees" (its HTML bytes and
time) and the process's peak RSS after both.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<a database holding the grown catalog> \\
        .venv/bin/python scripts/bench_scale.py [--runs 3]

Fill the database first with scripts/bench_index.py's phases (`--phase reset 100000`, then
`--phase build synthetic`: the catalog grown from ../shared/toolsets, its vectors and prebuilt
indexes stored). Each run is a fresh process. It does not start the stack or stream a
conversation over WebSocket (the load command, `python -m playground.loadtest`, does that).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure()))
        return
    runs = []
    for _ in range(args.runs):
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        out = subprocess.run([sys.executable, __file__, "--one"], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{json.dumps(runs[-1])} (load average before: {load})", flush=True)
    for key in ("first_search_s", "first_search_cpu_s", "model_view_bytes", "model_view_s", "peak_rss_mb", "rss_mb"):
        print(f"median {key}: {statistics.median(r[key] for r in runs)}")


if __name__ == "__main__":
    main()
