"""Open permission prompts hold no worker: another conversation's run time, alone and with N prompts open.

    .venv/bin/python -m playground.bench.prompts [--prompts 10] [--runs 3] [--workers 2] [--database-url postgres://…]

Starts the load command's embedded stack (daphne, a Celery worker with `--workers` processes, the
demo data, the offline demo agent; Redis and the database as `python -m playground.loadtest` finds
them), then:

1. warms up (each worker process loads the search index once), and times `--runs` conversations
   one after another, each asking the load test's question and watched over its socket: the
   baseline;
2. opens `--prompts` conversations whose message makes the demo agent call `Write`, which the demo
   data's rule sends to a person ("ask"), and waits until every one of them is waiting on its prompt;
3. times `--runs` conversations again while those prompts stay open, then checks they are all
   still waiting (nobody answered) and prints both medians and their ratio.

The target (docs/benchmarks.md): with 2 worker processes and 10 prompts open, the ratio stays
under 2. Before prompts were saved and their task ended, each open prompt held a worker process.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from playground.loadtest.cli import DEFAULT_MESSAGE, run_level
from playground.loadtest.client import LoadTestError, Session
from playground.loadtest.stack import EmbeddedStack

PROMPT_MESSAGE = 'Write "hello" to the file notes.txt'


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_times(session: Session, runs: int, timeout: float) -> list[float]:
    """Seconds from the message sent to the run's final frame, one conversation at a time."""
    times = []
    for _ in range(runs):
        results, _ = asyncio.run(run_level(session, 1, DEFAULT_MESSAGE, timeout))
        result = results[0]
        if not result.completed or result.finished_at is None or result.sent_at is None:
            raise LoadTestError(f"conversation {result.conversation_id} did not complete: {result.error}")
        times.append(result.finished_at - result.sent_at)
    return times


def open_prompts(session: Session, count: int, timeout: float) -> list[int]:
    """`count` conversations, each left waiting on a permission prompt; their ids."""
    from playground.conversations.models import Conversation, Event

    ids = []
    for _ in range(count):
        conversation_id = session.new_conversation()
        session.send_message(conversation_id, PROMPT_MESSAGE)
        ids.append(conversation_id)
    deadline = time.monotonic() + timeout
    while True:
        waiting = set(Conversation.objects.filter(pk__in=ids, status=Conversation.Status.WAITING).values_list("pk", flat=True))
        prompted = set(Event.objects.filter(conversation_id__in=ids, type="permission_prompt").values_list("conversation_id", flat=True))
        if len(waiting & prompted) == count:
            return ids
        stuck = Conversation.objects.filter(pk__in=ids).exclude(status__in=("running", "waiting")).values_list("pk", "status")
        if stuck:
            raise LoadTestError(f"conversations ended instead of waiting on a prompt: {list(stuck)} "
                                f"(does the demo data still ask before Write?)")
        if time.monotonic() > deadline:
            raise LoadTestError(f"only {len(waiting & prompted)} of {count} conversations reached their prompt in {timeout:g} s")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.bench.prompts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=10, help="prompts left open (default %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="timed conversations per phase (default %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default %(default)s)")
    parser.add_argument("--database-url", default="", help="PostgreSQL server for the run's own database (default: SQLite)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds any one phase may take")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.runs < 1 or args.workers < 1:
        parser.error("--prompts, --runs and --workers must be 1 or more")

    stack = EmbeddedStack(workers=args.workers, database_url=args.database_url, log=say)
    failed = True
    try:
        stack.start()
        session = Session(stack.base_urls[0])
        session.login(stack.username, stack.password)
        say(f"[prompts] warm-up: {args.workers} conversation(s)")
        asyncio.run(run_level(session, args.workers, DEFAULT_MESSAGE, args.timeout))
        alone = run_times(session, args.runs, args.timeout)
        say(f"[prompts] alone: {', '.join(f'{t:.2f}' for t in alone)} s; opening {args.prompts} prompts")
        ids = open_prompts(session, args.prompts, args.timeout)
        with_prompts = run_times(session, args.runs, args.timeout)
        from playground.conversations.models import Conversation

        still_waiting = Conversation.objects.filter(pk__in=ids, status=Conversation.Status.WAITING).count()
        figures = {
            "workers": args.workers, "prompts_open": still_waiting,
            "alone_p50_s": round(statistics.median(alone), 3),
            "with_prompts_p50_s": round(statistics.median(with_prompts), 3),
        }
        figures["ratio"] = round(figures["with_prompts_p50_s"] / figures["alone_p50_s"], 2)
        if args.json:
            print(json.dumps(figures))
        else:
            print(f"{args.workers} worker processes; a conversation's run, median of {args.runs}:")
            print(f"  alone:                {figures['alone_p50_s']:.2f} s")
            print(f"  with {still_waiting:>2} prompts open:   {figures['with_prompts_p50_s']:.2f} s   "
                  f"ratio {figures['ratio']:.2f} (target under 2)")
        failed = still_waiting != args.prompts
        if failed:
            say(f"[prompts] !!! only {still_waiting} of {args.prompts} prompts were still open at the end")
        return 1 if failed else 0
    except LoadTestError as error:
        say(f"[prompts] !!! {error}")
        return 1
    finally:
        stack.stop(keep_log=failed)
        say("[prompts] stack stopped" + (f"; its log is kept in {stack.log_path}" if failed else ""))


if __name__ == "__main__":
    raise SystemExit(main())
