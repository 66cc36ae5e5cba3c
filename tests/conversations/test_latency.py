"""Event → socket latency: how long from an event row being written to a connected client receiving it.

Prints the median (a measurement, not a timed assertion):
    .venv/bin/python -m pytest tests/conversations/test_latency.py -s -q
"""
from __future__ import annotations

import asyncio
import json
import re
import statistics
import threading
import time

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event
from playground.conversations.routing import websocket_urlpatterns

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.slow]
FRAME = re.compile(r'data-frame-sequence="(\d+)"')
EVENTS = 40
SPACING_SECONDS = 0.05  # a loop's pace: events apart, as a worker writes them


def write_events(conversation_id: int) -> None:
    """Like the worker: a separate thread with its own database connection, broadcasting after commit."""
    try:
        for i in range(EVENTS):
            record_event(conversation_id, ev.ToolCall(tool_use_id=f"toolu_{i}", name="echo", arguments={"text": str(i)}))
            time.sleep(SPACING_SECONDS)
    except BaseException as exc:
        print("writer failed:", repr(exc))
        raise
    finally:
        connection.close()


async def test_median_event_to_socket_latency(redis, admin_user):
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=admin_user)
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/")
    communicator.scope["user"] = admin_user
    assert (await communicator.connect(timeout=10))[0]
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    await asyncio.sleep(0.2)  # joined the group

    writer = threading.Thread(target=write_events, args=(conversation.pk,))
    writer.start()
    arrivals: dict[int, float] = {}
    while len(arrivals) < EVENTS:
        frame = await communicator.receive_from(timeout=10)
        arrivals[int(FRAME.search(frame).group(1))] = time.time()
    await database_sync_to_async(writer.join)()
    await communicator.disconnect()

    written = await database_sync_to_async(
        lambda: {e.sequence: e.created_at.timestamp() for e in Event.objects.filter(conversation=conversation)})()
    assert sorted(arrivals) == list(range(1, EVENTS + 1))
    latencies = sorted(1000 * (arrivals[s] - written[s]) for s in arrivals)
    print(f"\nevent written → socket frame received: n={EVENTS}, median {statistics.median(latencies):.1f} ms, "
          f"p90 {latencies[int(0.9 * len(latencies)) - 1]:.1f} ms, max {latencies[-1]:.1f} ms")
