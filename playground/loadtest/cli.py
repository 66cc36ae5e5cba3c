"""The command line: start (or target) a stack, run the levels one after another, print the result.

Every wait has a deadline; the children of an embedded stack are stopped on exit, on an error, on
Ctrl-C and on SIGTERM (and, being started with PR_SET_PDEATHSIG by the runner's supervisor, even
when this process is killed outright).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time

from playground.loadtest.client import LoadTestError, Session, run_conversation
from playground.loadtest.stack import EmbeddedStack
from playground.loadtest.stats import LEVEL_KEYS, ConversationResult, format_table, summarize_level, summarize_watchers
from playground.loadtest.watchers import run_watchers

DEFAULT_MESSAGE = "What is the weather forecast for Paris?"


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--conversations takes numbers separated by commas, not {text!r}") from None
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError("--conversations needs at least one level, each 1 or more")
    return levels


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m playground.loadtest",
        description="Run many demo-agent conversations at once, each watched over its socket, and measure delivery.",
    )
    parser.add_argument("--conversations", type=parse_levels, default=[1, 10], metavar="N[,N…]",
                        help="concurrent conversations per level, levels run in sequence (default 1,10)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes of the embedded stack (default 2)")
    parser.add_argument("--pool", choices=("prefork", "solo"), default="prefork", help="Celery pool of the embedded stack")
    parser.add_argument("--web-nodes", type=int, default=1,
                        help="embedded stack: web servers (daphne) on their own ports; conversations are started through one and watched through the next")
    parser.add_argument("--worker-nodes", type=int, default=1, help="embedded stack: Celery workers, each with --workers processes")
    parser.add_argument("--database-url", default="",
                        help="PostgreSQL server to create the run's own database on (dropped afterwards); default: an SQLite file")
    parser.add_argument("--database-template", default="", metavar="NAME",
                        help="with --database-url: copy the run's database from this prepared one on that server "
                             "(migrated, demo data and search index in place) instead of preparing it")
    parser.add_argument("--url", help="target a running playground instead of starting one (needs --user and --password)")
    parser.add_argument("--user", help="with --url: the account to log in as")
    parser.add_argument("--password", default=os.environ.get("LOADTEST_PASSWORD"), help="with --url (or LOADTEST_PASSWORD)")
    parser.add_argument("--message", default=DEFAULT_MESSAGE, help=f"what each conversation asks (default {DEFAULT_MESSAGE!r})")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a level may take before its runs count as not completed")
    parser.add_argument("--warmup", type=int, default=None,
                        help="unmeasured conversations first, so each worker process has loaded the search index (default: --workers)")
    parser.add_argument("--watchers", type=int, default=0, metavar="N",
                        help="instead of the levels: one conversation watched by N read-only sockets at once")
    parser.add_argument("--via", choices=("share", "viewers"), default="share",
                        help="--watchers: open the sockets through a share link (logged out, default) or the conversation's own socket")
    parser.add_argument("--words-per-second", type=float, default=None,
                        help="the demo agent's streaming pace on the embedded stack (DEMO_STREAM_WORDS_PER_SECOND; "
                             "default: 0 for the levels, so their figures compare with earlier runs; 12, readable, for --watchers)")
    parser.add_argument("--provider", choices=("demo", "anthropic", "openai"), default="demo",
                        help="embedded stack: the offline demo agent (default), or the real provider path — the official "
                             "SDK against the project's API double, run as its own HTTP process (playground/loadtest/api_double.py)")
    parser.add_argument("--model-latency", type=float, default=2.0,
                        help="with --provider anthropic/openai: seconds the API double takes to answer each call (default 2)")
    parser.add_argument("--code", default="",
                        help="embedded stack: run its processes from another checkout of this project (PYTHONPATH), "
                             "e.g. an older commit's `git worktree`, to measure old and new code side by side")
    parser.add_argument("--json", action="store_true", help='print {"levels": [...]} (or {"watchers": {...}}) instead of the table')
    args = parser.parse_args(argv)
    if args.watchers < 0:
        parser.error("--watchers must be 1 or more")
    if args.words_per_second is None:
        args.words_per_second = 12.0 if args.watchers else 0.0
    if args.url and not (args.user and args.password):
        parser.error("--url needs --user and --password (or LOADTEST_PASSWORD)")
    if args.workers < 1:
        parser.error("--workers must be 1 or more")
    if args.web_nodes < 1 or args.worker_nodes < 1:
        parser.error("--web-nodes and --worker-nodes must be 1 or more")
    if args.model_latency < 0:
        parser.error("--model-latency must be 0 or more")
    if args.url and (args.provider != "demo" or args.code):
        parser.error("--provider and --code start an embedded stack; they do not apply to --url")
    if args.database_template and not args.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("--database-template needs a PostgreSQL --database-url")
    if args.url and (args.web_nodes > 1 or args.worker_nodes > 1):
        parser.error("--web-nodes and --worker-nodes start an embedded stack; they do not apply to --url")
    return args


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_level(sessions, count: int, message: str, timeout: float) -> tuple[list[ConversationResult], float]:
    """`sessions`: one per web node. With several, conversation i is started through node i and
    watched through the next one, so every frame crosses nodes through the Redis channel layer."""
    sessions = sessions if isinstance(sessions, list) else [sessions]
    deadline = time.monotonic() + timeout
    results = [ConversationResult() for _ in range(count)]
    started = time.monotonic()
    tasks = []
    for number, result in enumerate(results):
        session = sessions[number % len(sessions)]
        watcher = sessions[(number + 1) % len(sessions)] if len(sessions) > 1 else None
        tasks.append(asyncio.create_task(run_conversation(session, message, deadline, result, watcher=watcher)))
    # Each conversation watches the deadline itself; this is the backstop should one hang elsewhere.
    done, pending = await asyncio.wait(tasks, timeout=timeout + 30)
    for task in pending:
        task.cancel()
    for task, result in zip(tasks, results):
        if task in pending:
            result.error = result.error or "cancelled at the level's deadline"
        elif task.exception() is not None:
            result.error = f"{task.exception().__class__.__name__}: {task.exception()}"
    ends = [r.finished_at for r in results if r.finished_at is not None]
    starts = [r.sent_at for r in results if r.sent_at is not None]
    # Wall time of the level: first message sent → last final frame (the whole wait if none finished).
    wall = (max(ends) - min(starts)) if ends and starts else time.monotonic() - started
    return results, wall


class LevelSampler:
    """Every half second while a level runs: the worker node's resident memory (all its processes) and
    the connections open to the run's PostgreSQL database; keeps the peaks."""

    def __init__(self, stack: EmbeddedStack | None) -> None:
        self.stack = stack
        self.rss_mb = 0.0
        self.connections_before = self.connections_peak = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)

    def __enter__(self) -> LevelSampler:
        if self.stack is not None:
            self.connections_before = self._connections()
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _connections(self) -> int | None:
        try:
            return self.stack.database_connections()
        except Exception:  # noqa: BLE001 - a busy server may refuse one look: the next one counts
            return None

    def _sample(self) -> None:
        while True:
            self.rss_mb = max(self.rss_mb, self.stack.node_memory_mb("worker"))
            connections = self._connections()
            if connections is not None:
                self.connections_peak = max(self.connections_peak or 0, connections)
            if self._stop.wait(0.5):
                return

    def figures(self) -> dict:
        return {"worker_rss_mb": round(self.rss_mb, 1) if self.stack is not None else None,
                "db_connections_before": self.connections_before, "db_connections_peak": self.connections_peak}


def cpu_spent(before: dict | None, after: dict | None) -> dict[str, float]:
    """CPU seconds each process tree spent between two readings ({} when any reading is missing)."""
    if not before or not after or any(before.get(k) is None or after.get(k) is None for k in after):
        return {}
    return {name: after[name] - before[name] for name in after}


def run_watchers_mode(args: argparse.Namespace, session: Session | list[Session], stack: EmbeddedStack | None) -> bool:
    """One conversation, `--watchers` read-only sockets; prints {"watchers": {...}}. True when every
    socket saw the run to its end and no frame was lost."""
    if args.warmup != 0:
        say("[load] warm-up: 1 conversation, not measured")
        asyncio.run(run_level(session, len(session) if isinstance(session, list) else 1, args.message, args.timeout))
    say(f"[load] {args.watchers} read-only sockets ({args.via}) on one conversation")
    cpu_before, client_before = (stack.cpu_seconds() if stack else None), time.process_time()
    conversation_id, watchers = asyncio.run(run_watchers(session, args.watchers, args.message, args.timeout, via=args.via))
    cpu_after, client_cpu = (stack.cpu_seconds() if stack else None), time.process_time() - client_before
    created, counts = stack.event_facts([conversation_id]) if stack else ({}, {})
    events = counts.get(conversation_id) or max((s for w in watchers for s, _ in w.receipts), default=0)
    spent = cpu_spent(cpu_before, cpu_after)
    web_cpu = sum(seconds for name, seconds in spent.items() if name.startswith("web")) if spent else None
    report = summarize_watchers([w.receipts for w in watchers], conversation_id=conversation_id, events=events,
                                created=created, web_cpu_s=web_cpu)
    say("[load]   " + ", ".join(f"{key}={value}" for key, value in report.items()) + f" (events {events})")
    if spent:
        say("[load]   cpu s: " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in spent.items()) +
            f", this client {client_cpu:.2f} (its sockets share the machine's cores)")
    errors = sorted({w.error for w in watchers if w.error})
    for error in errors[:5]:
        say(f"[load]   {sum(1 for w in watchers if w.error == error)} socket(s): {error}")
    print(json.dumps({"watchers": report}) if args.json else
          "\n".join(f"{key:>22}  {value}" for key, value in report.items()))
    return not errors and report["lost"] == 0 and all(w.finished for w in watchers)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    stack = None
    failed = True
    try:
        if args.url:
            session = Session(args.url)
            session.login(args.user, args.password)
            say(f"[load] logged in to {args.url} as {args.user}")
        else:
            os.environ["DEMO_STREAM_WORDS_PER_SECOND"] = f"{args.words_per_second:g}"  # the stack's children read it
            stack = EmbeddedStack(workers=args.workers, pool=args.pool, database_url=args.database_url, log=say,
                                  web_nodes=args.web_nodes, worker_nodes=args.worker_nodes, provider=args.provider,
                                  model_latency=args.model_latency, code_dir=args.code,
                                  template_database=args.database_template)
            stack.start()
            sessions = []
            for base_url in stack.base_urls:
                sessions.append(Session(base_url, provider=args.provider))
                sessions[-1].login(stack.username, stack.password)
            session = sessions if len(sessions) > 1 else sessions[0]
            # The demo data's import queued the search index build: wait for the worker to finish it,
            # or its encoding would be counted in the first levels' CPU per event.
            say(f"[load] search index build: {stack.wait_for_search_index() or 'not built in the background'}")
        if args.watchers:
            failed = not run_watchers_mode(args, session, stack)
            return 1 if failed else 0
        warmup = args.workers if args.warmup is None else args.warmup
        if args.url and args.warmup is None:
            warmup = 0
        if warmup:
            say(f"[load] warm-up: {warmup} conversation(s), not measured")
            asyncio.run(run_level(session, warmup, args.message, args.timeout))
        levels = []
        for count in args.conversations:
            say(f"[load] level: {count} conversation(s) at once")
            cpu_before = stack.cpu_seconds() if stack else None
            with LevelSampler(stack) as sampler:
                results, wall = asyncio.run(run_level(session, count, args.message, args.timeout))
            cpu_after = stack.cpu_seconds() if stack else None
            created = expected = None
            if stack is not None:
                created, expected = stack.event_facts([r.conversation_id for r in results if r.conversation_id is not None])
            # The API double plays the model: its CPU is the vendor's, not the playground's.
            spent = {name: seconds for name, seconds in cpu_spent(cpu_before, cpu_after).items() if name != "api"}
            cpu = sum(spent.values()) if spent else None
            level = summarize_level(results, wall_s=wall, created=created, expected_last=expected, cpu_s=cpu)
            worker_cpu = sum(v for k, v in spent.items() if k.startswith("worker")) if spent else None
            level.update(worker_cpu_ms_per_event=round(worker_cpu * 1000 / level["events"], 2)
                         if worker_cpu is not None and level["events"] else None)
            level.update(sampler.figures(), provider=args.provider)
            levels.append(level)
            say("[load]   " + ", ".join(f"{key}={level[key]}" for key in LEVEL_KEYS))
            if spent and level["events"]:
                say("[load]   cpu ms per event: " + ", ".join(f"{name} {seconds * 1000 / level['events']:.2f}" for name, seconds in spent.items()))
            for result in results:
                if result.error:
                    say(f"[load]   conversation {result.conversation_id}: {result.error}")
            if stack is not None and stack.crashed():
                say(f"[load] !!! {stack.crashed()}\n{stack.log_tail()}")
                break
        if args.json:
            print(json.dumps({"levels": levels}))
        else:
            print(format_table(levels))
        ok = all(level["completed"] == level["conversations"] for level in levels) and len(levels) == len(args.conversations)
        failed = not ok
        return 0 if ok else 1
    except KeyboardInterrupt:
        say("[load] interrupted: stopping")
        return 130
    except LoadTestError as error:
        say(f"[load] !!! {error}")
        if stack is not None:
            say(stack.log_tail())
        return 1
    except Exception as error:  # noqa: BLE001 - whatever broke the stack, print it and its logs
        say(f"[load] !!! {error.__class__.__name__}: {error}")
        if stack is not None:
            say(stack.log_tail())
        return 1
    finally:
        if stack is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
            stack.stop(keep_log=failed)
            say("[load] stack stopped" + (f"; its log is kept in {stack.log_path}" if failed else ""))
