"""Per-event broadcast cost from sync code (as a Celery worker sends), on the real Redis channel layer.

    .venv/bin/python -m playground.bench.broadcast [--sends 300]

"per-send layer" is how events used to go out: `async_to_sync` runs a new event loop, a new channel
layer opens a new Redis connection, sends, and closes it, for every event. "process layer" is
`playground.realtime.send_to_group`: one loop thread and one layer (one connection pool) for the
process. Both send to a group with one member (a channel that a listener joined), as a watched
conversation has; the script uses its own channel prefix and removes what it wrote. Printed: wall
time per send (median, p90, max) and the process's CPU time per send (all threads, the loop's too).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
os.environ["CHANNELS_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}"

import django

django.setup()

from django.conf import settings  # noqa: E402

# Nobody reads the member channel: without room, channels_redis skips it once 100 messages wait
# (the default capacity) and the sends stop writing anything.
settings.CHANNEL_LAYERS["default"].setdefault("CONFIG", {})["capacity"] = 1_000_000

from asgiref.sync import async_to_sync  # noqa: E402
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers  # noqa: E402

from playground.realtime import send_to_group  # noqa: E402

GROUP = "bench-broadcast"


async def per_send_layer(group: str, message: dict) -> None:
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    try:
        await layer.group_send(group, message)
    finally:
        await layer.close_pools()


def measure(send, sends: int) -> tuple[list[float], float]:
    """Wall time of each send (ms), and the process's CPU time per send (ms, all threads)."""
    times = []
    cpu_started = time.process_time()
    for n in range(sends):
        message = {"type": "conversation.event", "conversation_id": 1, "sequence": n}
        started = time.perf_counter()
        send(GROUP, message)
        times.append((time.perf_counter() - started) * 1000)
    return times, (time.process_time() - cpu_started) * 1000 / sends


def report(label: str, measured: tuple[list[float], float]) -> float:
    times, cpu = measured
    ordered = sorted(times)
    median = statistics.median(ordered)
    print(f"{label:<15} n={len(ordered)}  median {median:7.3f} ms  p90 {ordered[int(0.9 * len(ordered)) - 1]:7.3f} ms"
          f"  max {ordered[-1]:7.3f} ms  CPU {cpu:6.3f} ms/send")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=300, help="sends per method (default 300)")
    args = parser.parse_args()

    member_layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)

    async def join() -> str:
        channel = await member_layer.new_channel()
        await member_layer.group_add(GROUP, channel)
        await member_layer.close_pools()
        return channel

    async def leave(channel: str) -> None:
        await member_layer.group_discard(GROUP, channel)
        await member_layer.flush()  # everything under this run's prefix
        await member_layer.close_pools()

    channel = async_to_sync(join)()
    try:
        measure(send_to_group, 10)  # warm up: the process layer connects once
        measure(async_to_sync(per_send_layer), 10)
        before = report("per-send layer", measure(async_to_sync(per_send_layer), args.sends))
        after = report("process layer", measure(send_to_group, args.sends))
        print(f"per event: {before:.3f} ms → {after:.3f} ms ({before / after:.1f}x less)")
    finally:
        async_to_sync(leave)(channel)


if __name__ == "__main__":
    main()
