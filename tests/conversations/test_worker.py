"""A real Celery worker (in this process) runs the loop; its events reach a connected socket through Redis."""
from __future__ import annotations

import json
import re
import statistics
import time

import pytest
from celery.contrib.testing.worker import start_worker
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from playground.celery_app import app
from playground.conversations import services
from playground.conversations.models import Conversation, Event
from playground.conversations.routing import websocket_urlpatterns

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.slow]
FRAME = re.compile(r'data-frame-sequence="(\d+)"')


@pytest.fixture
def celery_worker(redis, settings):
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = settings.REDIS_URL, False
    # Tasks other tests queued after commit (and nobody ran) would otherwise go first.
    app.control.purge()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10) as worker:
        yield worker
    app.conf.broker_url, app.conf.task_always_eager = previous


async def test_a_worker_streams_the_demo_agent_run_to_the_socket(celery_worker, admin_user, tool_world, native_profile):
    conversation = await database_sync_to_async(services.start_conversation)(admin_user, profile=native_profile, provider="demo")
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/")
    communicator.scope["user"] = admin_user
    assert (await communicator.connect(timeout=10))[0]
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    await database_sync_to_async(services.send_message)(conversation, "What time is it in Tokyo?", user=admin_user)

    arrivals: dict[int, float] = {}
    frames: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        frame = await communicator.receive_from(timeout=60)
        arrivals[int(FRAME.search(frame).group(1))] = time.time()
        frames.append(frame)
        if 'data-event-type="status"' in frame and 'data-status="idle"' in frame:
            break
    await communicator.disconnect()

    sequences = list(arrivals)
    assert sequences == sorted(sequences) and sequences == list(range(1, len(sequences) + 1))  # in order, no gaps, no repeats
    kinds = [re.search(r'data-event-type="(\w+)"', f).group(1) for f in frames]
    for expected in ("toolsearch_query", "tool_call", "tool_result", "turn_finished", "status"):
        assert expected in kinds, kinds
    assert kinds.index("toolsearch_query") < kinds.index("tool_call") < kinds.index("tool_result")
    assert "mcp__time__get_current_time" in "".join(frames)
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert conversation.status == Conversation.Status.IDLE
    written = await database_sync_to_async(lambda: {e.sequence: e.created_at.timestamp() for e in Event.objects.filter(conversation=conversation)})()
    latencies = [1000 * (arrivals[s] - written[s]) for s in arrivals]
    print(f"\nworker → socket: {len(latencies)} events, median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")
