"""`python -m playground.agenteval`: run labelled tasks under several profiles and print the figures.

On the configured stack (its database and a running Celery worker), or with `--own-stack` on a stack
of its own started and stopped as the load command starts one (its own database, Redis prefix and
queue, worker and demo data: it works on a fresh checkout with nothing running). Progress goes to
stderr; `--json` prints one object: {"tasks", "profiles": [...], "pairs": [...]}.

Django is set up only once the stack is chosen (the own stack sets the database and queue first), so
the app's modules are imported inside `run_tasks`.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

PROFILE_KEYS = ("profile", "provider", "tasks", "completed", "success", "success_ci", "first_call_success",
                "searches_per_task", "turns_per_task", "model_calls_per_task", "input_tokens_per_task",
                "output_tokens_per_task", "cache_read_tokens_per_task", "cache_write_tokens_per_task", "cost_usd_per_task", "task_p50_s", "errors")
PAIR_KEYS = ("a", "b", "success_diff", "p_value")
EVERY_MODE = "every-mode"


class CommandError(RuntimeError):
    pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m playground.agenteval",
        description="Run labelled tasks through the real agent loop under several profiles: success, searches, tokens, cost, time.",
    )
    parser.add_argument("--tasks", required=True, metavar="TOOLSET_OR_FILE",
                        help="a toolset with labelled queries (as the evaluation page lists them) or a queries.jsonl file")
    parser.add_argument("--profiles", required=True, metavar='"NAME,NAME"',
                        help=f"agent profile names, comma-separated; {EVERY_MODE!r}: one profile per loading mode")
    parser.add_argument("--limit", type=int, default=None, help="evenly sampled tasks of the split (default: all)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all", help="which tasks (default all)")
    parser.add_argument("--policy", choices=("allow", "deny"), default="allow", help="answer to permission prompts (default allow)")
    parser.add_argument("--concurrency", type=int, default=2, help="conversations at once (default 2)")
    parser.add_argument("--catalog", default="", help="with a file: the toolset whose catalog its tasks were labelled on")
    parser.add_argument("--import-catalog", action="store_true",
                        help="when the registry lacks the tasks' tools, import their catalog as catalog-only tools (simulated calls)")
    parser.add_argument("--own-stack", action="store_true", help="start a stack of its own (database, Redis, worker, demo data)")
    parser.add_argument("--workers", type=int, default=2, help="--own-stack: Celery worker processes (default 2)")
    parser.add_argument("--database-url", default="", help="--own-stack: PostgreSQL server for its database (default SQLite)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the run may take (default 3600)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be 1 or more")
    if not 1 <= args.concurrency <= 16:
        parser.error("--concurrency must be between 1 and 16")
    if not [name for name in args.profiles.split(",") if name.strip()]:
        parser.error("--profiles names at least one profile")
    return args


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def json_shape(report: dict[str, Any]) -> dict[str, Any]:
    """Exactly the documented shape (the page's report carries a few more fields)."""
    return {"tasks": report["tasks"],
            "profiles": [{key: row[key] for key in PROFILE_KEYS} for row in report["profiles"]],
            "pairs": [{key: pair[key] for key in PAIR_KEYS} for pair in report["pairs"]]}


def fixed(value: float, places: int) -> str:
    """A measure to `places` decimals as the page shows it (Django's floatformat: the value's decimal
    form rounded half up), not Python's format (the binary value, half to even): 1.125 is 1.13 on both."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP))


def format_table(report: dict[str, Any]) -> str:
    lines = [f"{'profile':<28} {'provider':<10} {'done':>9} {'success [95% CI]':>22} {'1st ok':>7} {'search':>7} "
             f"{'turns':>6} {'calls':>6} {'in tok':>9} {'cache rd':>9} {'cache wr':>9} {'out tok':>8} {'$/task':>10} {'p50 s':>7}  errors"]
    for row in report["profiles"]:
        cost = "—" if row["cost_usd_per_task"] is None else fixed(row["cost_usd_per_task"], 5)
        low, high = row["success_ci"]
        lines.append(
            f"{row['profile'][:28]:<28} {row['provider'][:10]:<10} {row['completed']:>4}/{row['tasks']:<4} "
            f"{row['success']:>7.0%} [{low:.0%}–{high:.0%}]".ljust(64) + f" {row['first_call_success']:>6.0%} "
            f"{fixed(row['searches_per_task'], 2):>7} {fixed(row['turns_per_task'], 2):>6} {fixed(row['model_calls_per_task'], 2):>6} "
            f"{row['input_tokens_per_task']:>9} {row['cache_read_tokens_per_task']:>9} {row['cache_write_tokens_per_task']:>9} "
            f"{row['output_tokens_per_task']:>8} {cost:>10} {fixed(row['task_p50_s'], 2):>7}  "
            + (", ".join(f"{k} {v}" for k, v in row["errors"].items()) or "—"))
    for pair in report["pairs"]:
        lines.append(f"{pair['a']} − {pair['b']}: success {pair['success_diff']:+.0%} on the same tasks, "
                     f"p = {pair['p_value']:.3f} (exact McNemar){'' if pair['p_value'] < 0.05 else ': could be noise'}")
    return "\n".join(lines)


def run_tasks(args: argparse.Namespace) -> dict[str, Any]:
    """Set up Django, resolve the tasks and profiles, start the run and wait for it; the report."""
    import django

    django.setup()
    from django.db import close_old_connections

    from playground.agenteval import selectors, services, sources
    from playground.agenteval.models import TaskRun, TaskSet
    from playground.registry.models import AgentProfile

    path = Path(args.tasks).expanduser()
    try:
        if path.is_file():
            data = path.read_bytes()
            name = f"{path.name} ({len(data)} bytes)"
            task_set = (TaskSet.objects.filter(name=name).first()
                        or sources.task_set_from_upload(name, data, catalog=args.catalog))
        else:
            task_set = sources.task_set_from_toolset(args.tasks)
    except sources.TaskSourceError as exc:
        raise CommandError(str(exc)) from None
    names = [name.strip() for name in args.profiles.split(",") if name.strip()]
    if EVERY_MODE in names:  # the page's "every loading mode": one profile per mode, beside any named
        names = list(dict.fromkeys(n for name in names for n in (
            [p.name for p in selectors.loading_mode_profiles()] if name == EVERY_MODE else [name])))
    profiles = {p.name: p for p in AgentProfile.objects.filter(name__in=names)}
    unknown = [name for name in names if name not in profiles]
    if unknown:
        known = ", ".join(AgentProfile.objects.order_by("name").values_list("name", flat=True))
        raise CommandError(f"No profile named {', '.join(map(repr, unknown))} (profiles: {known}).")
    tasks = services.select_tasks(task_set, args.split, args.limit)
    if args.import_catalog and sources.missing_tools(task_set, tasks):
        summary = sources.import_catalog(task_set)
        say(f"[agenteval] imported the {task_set.catalog} catalog as catalog-only tools (calls simulated): {summary}")
    try:
        run = services.start_run(task_set, [profiles[n] for n in names], split=args.split, limit=args.limit,
                                 policy=args.policy, concurrency=args.concurrency)
    except services.TaskRunError as exc:
        hint = " (or pass --import-catalog)" if "Import the" in str(exc) else ""
        raise CommandError(f"{exc}{hint}") from None
    say(f"[agenteval] task run {run.pk}: {run.items.count()} conversations ({len(tasks)} tasks × {len(names)} profiles), "
        f"{args.concurrency} at once")
    deadline = time.monotonic() + args.timeout
    shown = -1
    while True:
        close_old_connections()
        run.refresh_from_db()
        progress = selectors.progress(run)
        if progress["finished"] != shown:
            shown = progress["finished"]
            say(f"[agenteval] {progress['finished']}/{progress['total']} finished, {progress['running']} running")
        if not run.is_active:
            break
        if time.monotonic() > deadline:
            services.cancel_run(run)
            raise CommandError(f"the run took longer than {args.timeout:g} s: cancelled (is a Celery worker running?)")
        time.sleep(0.5)
    if run.status != TaskRun.Status.DONE:
        say(f"[agenteval] the run ended {run.status}")
    return selectors.report(run)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    stack = None
    failed = True
    try:
        if args.own_stack:
            from playground.loadtest.stack import EmbeddedStack

            stack = EmbeddedStack(workers=args.workers, pool="prefork", database_url=args.database_url, beat=True,
                                  log=lambda m: say(m.replace("[load]", "[agenteval]")))
            stack.start()
            say(f"[agenteval] search index build: {stack.wait_for_search_index() or 'not built in the background'}")
        report = run_tasks(args)
        print(json.dumps(json_shape(report)) if args.json else format_table(report))
        failed = not all(row["completed"] == row["tasks"] for row in report["profiles"])
        return 1 if failed else 0
    except KeyboardInterrupt:
        say("[agenteval] interrupted")
        return 130
    except CommandError as error:
        say(f"[agenteval] !!! {error}")
        return 2
    finally:
        if stack is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            stack.stop(keep_log=failed)
            say("[agenteval] stack stopped" + (f"; its log is kept in {stack.log_path}" if failed else ""))
