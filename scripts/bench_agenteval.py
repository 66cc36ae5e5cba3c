"""A task run's overhead over plain conversations, side by side on one embedded stack (the load command's).

    .venv/bin/python scripts/bench_agenteval.py [--tasks 30] [--rounds 3] [--concurrency 2] [--toolset demo] [--database-url URL]

Each round runs the same N requests of a labelled set (default: `demo`, the one that ships) under one
profile twice, alternating which goes first: as plain conversations (started and sent through the
conversations' services, at most `--concurrency` at once, the next one sent as soon as one ends, a
permission prompt approved once as soon as it shows — what a person or the load command does), and as a task run of the same tasks at the same concurrency.
Printed: the wall time per conversation of each (the batch's wall ÷ N), per round and the medians,
and the overhead of the task run in percent.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from playground.loadtest.stack import EmbeddedStack  # sets the stack's environment before Django


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plain_batch(queries: list[str], profile, owner, concurrency: int) -> float:
    from django.db import close_old_connections

    from playground.conversations import runs, services
    from playground.conversations.models import Conversation

    finished = (Conversation.Status.IDLE, Conversation.Status.FAILED, Conversation.Status.CANCELLED)
    waiting, running = list(queries), []
    started = time.monotonic()
    while waiting or running:
        close_old_connections()
        still = []
        for conversation in Conversation.objects.filter(pk__in=running):
            if conversation.status in finished:
                continue
            still.append(conversation.pk)
            prompt = (conversation.paused_run or {}).get("prompt_sequence")
            if conversation.status == Conversation.Status.WAITING and prompt and runs.pending_answer(conversation.pk, prompt) is None:
                services.answer_permission(conversation, prompt, "once", user=owner)  # as the task run's allow policy does
        running = still
        while waiting and len(running) < concurrency:
            conversation = services.start_conversation(owner, profile=profile)
            services.send_message(conversation, waiting.pop(0), user=owner)
            running.append(conversation.pk)
        time.sleep(0.05)
    return time.monotonic() - started


def task_run_batch(task_set, profile, owner, limit: int, concurrency: int) -> float:
    from django.db import close_old_connections

    from django.db.models import Max

    from playground.agenteval import services
    from playground.conversations.models import Event

    started = time.monotonic()
    run = services.start_run(task_set, [profile], limit=limit, concurrency=concurrency, user=owner)
    while True:
        close_old_connections()
        run.refresh_from_db()
        if not run.is_active:
            wall = time.monotonic() - started
            items = list(run.items.order_by("started_at").values_list("started_at", "conversation_id"))
            # A conversation's end is its last event (its task's measures are recorded a moment later).
            last = dict(Event.objects.filter(conversation_id__in=[c for _, c in items]).values("conversation_id")
                        .annotate(end=Max("created_at")).values_list("conversation_id", "end"))
            ends = sorted(last[c] for _, c in items)
            # How long each start waited after the end that freed its place (the scheduler's own latency).
            waits = [(start - end).total_seconds() for (start, _), end in zip(items[concurrency:], ends, strict=False)]
            say(f"  task run: start after a conversation's end freed its place, median {statistics.median(waits) * 1000:.0f} ms, "
                f"max {max(waits) * 1000:.0f} ms, over 1 s: {sum(1 for w in waits if w > 1)}")
            return wall
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--profile", default="Tool search on (native)")
    parser.add_argument("--toolset", default="demo", help="the labelled set whose requests run (default demo)")
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    stack = EmbeddedStack(workers=args.concurrency, pool="prefork", database_url=args.database_url, log=say)
    try:
        stack.start()
        say(f"search index: {stack.wait_for_search_index() or 'not built in the background'}")
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        from playground.agenteval import services, sources
        from playground.registry.models import AgentProfile

        owner = get_user_model().objects.get(username=stack.username)
        profile = AgentProfile.objects.get(name=args.profile)
        task_set = sources.task_set_from_toolset(args.toolset)
        queries = [task.query for task in services.select_tasks(task_set, "all", args.tasks)]
        plain_batch(queries[:2], profile, owner, args.concurrency)  # warm-up: each worker process loads its index
        rows = []
        for number in range(args.rounds):
            order = ("plain", "task run") if number % 2 == 0 else ("task run", "plain")
            walls = {}
            for kind in order:
                walls[kind] = (plain_batch(queries, profile, owner, args.concurrency) if kind == "plain"
                               else task_run_batch(task_set, profile, owner, args.tasks, args.concurrency))
            rows.append({kind: round(seconds / len(queries), 3) for kind, seconds in walls.items()})
            say(f"round {number + 1}: plain {rows[-1]['plain']:.3f} s/conversation, task run {rows[-1]['task run']:.3f}")
        plain = statistics.median(r["plain"] for r in rows)
        task_run = statistics.median(r["task run"] for r in rows)
        print(json.dumps({"tasks": len(queries), "concurrency": args.concurrency, "profile": args.profile, "rounds": rows,
                          "plain_s_per_conversation": plain, "task_run_s_per_conversation": task_run,
                          "overhead_percent": round(100 * (task_run - plain) / plain, 1)}))
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
