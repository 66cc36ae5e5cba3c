"""The worker's CPU per event, measured in one process without the rest of the stack competing.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python -m playground.bench.worker_cpu \\
        [--conversations 30] [--runs 3] [--profile worker.prof]

The load command (`python -m playground.loadtest`) measures web + worker CPU per delivered event with
everything on the same two cores; there a change of 1 ms per event drowns in the machine's noise.
This runs what a worker runs for the load command's conversations (the demo agent answering "What is
the weather forecast for Paris?": ToolSearch, the weather tools, one call, the answer) in-process,
one conversation after another, and divides the process's CPU time (every thread: the loop, the
channel-layer sender) by the events saved. Each event is broadcast to a group with one member on the
real Redis, as a watched conversation's is.

It works in a database of its own (`<name>_bench_worker`, created and dropped), migrated and given
the demo data, with its search index built first (as the load command waits for it). `--profile`
writes a cProfile of the measured runs (thread CPU time of the loop's thread).
"""
from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import time
import uuid
from urllib.parse import urlparse, urlunparse

MESSAGE = "What is the weather forecast for Paris?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=30, help="conversations per measured run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", default="", help="write a cProfile of the measured runs here")
    args = parser.parse_args()
    configured = os.environ.get("DATABASE_URL", "")
    if not configured.startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (the bench creates <name>_bench_worker there)")
    import psycopg

    name = f"bench_worker_{uuid.uuid4().hex[:8]}"
    admin = urlunparse(urlparse(configured)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunparse(urlparse(configured)._replace(path="/" + name))
    os.environ["CHANNELS_PREFIX"] = name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    try:
        measure(args)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from playground.conversations import services, tasks
    from playground.conversations.broadcast import conversation_group
    from playground.conversations.models import Event
    from playground.per_process import portal
    from playground.registry import indexing, tasks as registry_tasks

    call_command("migrate", interactive=False, verbosity=0)
    registry_tasks.build_search_index_task.delay = lambda version: None  # built inline below
    call_command("load_demo_data", stdout=open(os.devnull, "w"))  # noqa: SIM115
    build = indexing.schedule_index_build()
    if build is not None:
        indexing.build_index(build.version)
    user = get_user_model().objects.create(username="bench")
    # The watchers' layer lives on the process's portal loop: the pub/sub layer is bound to a loop,
    # and a channel must be made in the process (new_channel) before it joins a group.
    watchers: list = []

    async def watch(group: str) -> None:
        if not watchers:
            watchers.append(channel_layers.make_backend(DEFAULT_CHANNEL_LAYER))
        await watchers[0].group_add(group, await watchers[0].new_channel())

    queued: list[tuple[int, str]] = []
    tasks.run_conversation_task.delay = lambda conversation_id, run_token="": queued.append((conversation_id, run_token))

    def start(count: int) -> list[tuple[int, str]]:
        queued.clear()
        for _ in range(count):
            conversation = services.start_conversation(user, provider="demo")
            # One socket watching, as in the load command: the broadcast has a member to reach.
            portal().submit(watch(conversation_group(conversation.pk))).result(timeout=30)
            services.send_message(conversation, MESSAGE, user=user)
        return list(queued)

    for conversation_id, token in start(2):  # warm: the index loaded, templates compiled
        tasks.run_conversation_task(conversation_id, token)
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    per_event = []
    for run in range(args.runs):
        runs = start(args.conversations)
        ids = [c for c, _ in runs]
        before = Event.objects.filter(conversation_id__in=ids).count()
        load = os.getloadavg()[0]
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        for conversation_id, token in runs:
            outcome = tasks.run_conversation_task(conversation_id, token)
            if outcome != "end_turn":
                raise SystemExit(f"conversation {conversation_id} ended {outcome!r}")
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        events = Event.objects.filter(conversation_id__in=ids).count() - before
        per_event.append(cpu * 1000 / events)
        print(f"run {run + 1}: {events} events, worker CPU {per_event[-1]:.2f} ms per event, "
              f"wall {wall * 1000 / events:.2f} ms per event (load average {load:.2f})", flush=True)
    print(f"median worker CPU per event: {statistics.median(per_event):.2f} ms")
    if profiler:
        profiler.dump_stats(args.profile)
        print(f"profile written to {args.profile}")


if __name__ == "__main__":
    main()
