"""The retrieval backends' speed rows of two code versions, side by side: alternated runs, medians.

    .venv/bin/python scripts/bench_compare.py OLD_WORKTREE NEW_WORKTREE [--sizes 100000] [--backends hybrid] [--runs 2]

Each run is `speed.run` (the rows `bench --search-backends` prints: the same grown catalogs, keyword
and natural queries, best of 3 per query) in a fresh process of one worktree; the worktrees take
turns (old, new, old, new …) so that a busy machine weighs on both alike. Prints, per backend, size
and style, the median over runs of p50 and p95 for each version.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

RUN = """
import json, sys
from pathlib import Path
from playground.engine.catalog_io import toolsets_dir
try:  # the bench's home since it left the engine; the older code had it in engine/search/speed.py
    from playground.bench import search_speed as speed
except ImportError:
    from playground.engine.search import speed
rows = speed.run(toolsets_dir(), backends=sys.argv[1].split(","), sizes=[int(s) for s in sys.argv[2].split(",")], queries=int(sys.argv[3]))
print(json.dumps([{"tools": r.tools, "style": r.style, "backend": r.backend, "p50_ms": r.p50_ms, "p95_ms": r.p95_ms, "build_s": r.build_s} for r in rows]))
"""


def run(worktree: str, args: argparse.Namespace) -> list[dict]:
    # The same toolsets for both, wherever the worktree is (a second worktree under /tmp has none beside it).
    env = {**os.environ, "PYTHONPATH": worktree, "TOOLSETS_DIR": args.toolsets}
    out = subprocess.run([sys.executable, "-c", RUN, args.backends, args.sizes, str(args.queries)], cwd=worktree,
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{worktree}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--backends", default="hybrid")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--toolsets", help="the shared toolsets (default: this worktree's, as `bench` finds them)")
    args = parser.parse_args()
    if not args.toolsets:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from playground.engine.catalog_io import toolsets_dir

        args.toolsets = str(toolsets_dir())
    results: dict[str, list[list[dict]]] = {"old": [], "new": []}
    for n in range(args.runs):
        for version in ("old", "new"):
            print(f"... run {n + 1}/{args.runs}: {version}", file=sys.stderr, flush=True)
            results[version].append(run(getattr(args, version), args))
    print("| backend | tools | style | old p50 / p95 ms | new p50 / p95 ms | old / new build s |")
    print("|---|---:|---|---:|---:|---:|")
    for row in results["old"][0]:
        key = (row["backend"], row["tools"], row["style"])

        def median(version: str, field: str, key=key) -> float:
            return statistics.median(r[field] for rows in results[version] for r in rows if (r["backend"], r["tools"], r["style"]) == key)

        print(f"| {key[0]} | {key[1]:,} | {key[2]} | {median('old', 'p50_ms'):.1f} / {median('old', 'p95_ms'):.1f} | "
              f"{median('new', 'p50_ms'):.1f} / {median('new', 'p95_ms'):.1f} | {median('old', 'build_s'):.1f} / {median('new', 'build_s'):.1f} |")
    print(f"medians of {args.runs} alternated runs per version")


if __name__ == "__main__":
    main()
