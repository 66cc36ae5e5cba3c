"""The usage overview's queries over many events (docs/traces.md, "The usage overview").

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/playground .venv/bin/python -m playground.bench.overview \\
        [--events 100000] [--runs 5]

Creates a database of its own (dropped at the end) beside DATABASE_URL's, fills it with `--events`
events over 30 days — a tenth of them model calls with usage and durations, the rest the other kinds
a run records — in 2,000 conversations of 5 profiles, then times `overview()` for each period
(median of `--runs`), with the (type, created_at) index and without it, side by side in one run,
and the 30-day period split per profile, provider, model, user and kind (a call's provider is read
from its turn's event, so each model call has one). Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

KINDS = ("message", "turn_started", "toolsearch_query", "tool_call", "tool_result", "turn_finished", "status", "model_request", "error")


def fill(events: int) -> None:
    from django.contrib.auth import get_user_model

    from playground.conversations.models import Conversation, Event
    from playground.registry.models import AgentProfile

    rng = random.Random(7)
    owner = get_user_model().objects.create_user("bench")
    profiles = [AgentProfile.objects.create(name=f"bench profile {n}") for n in range(5)]
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=owner, profile=profiles[n % 5]) for n in range(2000))
    sequences = dict.fromkeys((c.pk for c in conversations), 0)
    batch = []
    for n in range(events):
        conversation = conversations[rng.randrange(len(conversations))]
        sequences[conversation.pk] += 1
        if n % 10 == 0:
            # The call's turn first: a split per provider (or a model the response does not name) reads it.
            batch.append(Event(conversation=conversation, sequence=sequences[conversation.pk], type="turn_started",
                               payload={"turn": 1, "provider": rng.choice(["anthropic", "demo"]), "model": "claude-sonnet-4-5"}))
            sequences[conversation.pk] += 1
            turn_sequence = sequences[conversation.pk] - 1
            kind = "model_response"
            payload = {"stop_reason": "end_turn", "model": rng.choice(["claude-sonnet-4-5", "claude-haiku-4-5"]), "cache_ttl": "5m",
                       "usage": {"input": rng.randrange(500, 20000), "output": rng.randrange(10, 800),
                                 "cache_read": rng.choice([0, 0, 4000])}, "duration_ms": rng.uniform(200, 6000)}
        else:
            kind = rng.choice(KINDS)
            payload = {"final": True} if kind == "turn_finished" else {"is_error": rng.random() < 0.05} if kind == "tool_result" else {}
            turn_sequence = None
        batch.append(Event(conversation=conversation, sequence=sequences[conversation.pk], type=kind, payload=payload,
                           turn_sequence=turn_sequence))
        if len(batch) == 5000:
            Event.objects.bulk_create(batch)
            batch = []
    Event.objects.bulk_create(batch)
    with connection.cursor() as cursor:  # created_at is auto_now_add: spread the rows over 30 days afterwards
        cursor.execute("UPDATE conversations_event SET created_at = now() - random() * interval '30 days'")
        cursor.execute("VACUUM ANALYZE conversations_event")  # as autovacuum would: the update's dead rows gone


def time_periods(runs: int) -> dict[str, float]:
    from playground.conversations.overview import PERIODS, overview

    figures = {}
    for period in PERIODS:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            overview(period)
            times.append((time.perf_counter() - started) * 1000)
        figures[period] = round(statistics.median(times), 1)
    return figures


def time_splits(runs: int, period: str = "30d") -> dict[str, float]:
    from playground.conversations.overview import SPLITS, overview

    figures = {}
    for split in SPLITS:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            overview(period, split=split)
            times.append((time.perf_counter() - started) * 1000)
        figures[split] = round(statistics.median(times), 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("run it on PostgreSQL (DATABASE_URL=postgres://…): production's database")
    setup_test_environment()
    connection.settings_dict["TEST"]["NAME"] = f"bench_overview_{uuid.uuid4().hex[:8]}"
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        started = time.perf_counter()
        fill(args.events)
        filled_s = time.perf_counter() - started
        with_index = time_periods(args.runs)
        per_split = time_splits(args.runs)
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX event_type_created")
            cursor.execute("ANALYZE")
        without_index = time_periods(args.runs)
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)
    print(json.dumps({"events": args.events, "fill_s": round(filled_s, 1), "median_ms_with_index": with_index,
                      "median_ms_without_index": without_index,
                      "median_ms_30d_per_split": per_split, "runs": args.runs}, indent=2))


if __name__ == "__main__":
    main()
