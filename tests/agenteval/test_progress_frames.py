"""A task run's live frames: the panel and the grid cells that changed, from the page's own templates,
rendered only while a socket watches the run (the consumer counts its sockets in Redis)."""
from __future__ import annotations

import re

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from playground.agenteval import broadcast, services
from playground.agenteval.models import TaskRunItem, TaskSet
from playground.agenteval.routing import websocket_urlpatterns
from playground.conversations import runs as conversation_runs
from tests.conversations.conftest import redis  # noqa: F401 - the fixture, used by name

CELL = re.compile(r'<span id="task-cell-(\d+)" data-testid="task-cell" data-status="(\w+)" hx-swap-oob="true">')


@pytest.fixture
def run_of_three(tool_world, claude_profiles, admin_user, monkeypatch):
    monkeypatch.setattr(services, "queue_advance", lambda run_id: None)
    monkeypatch.setattr(conversation_runs, "queue_run", lambda *args, **kwargs: None)
    task_set = TaskSet.objects.create(name="three", source=TaskSet.Source.UPLOAD)
    for position, query in enumerate(["What time is it in Tokyo?", "Weather forecast for Paris", "Post 'hi' to #general"]):
        task_set.tasks.create(external_id=f"t{position}", query=query, expected_tools=["mcp__time__get_current_time"],
                              position=position)
    run = services.start_run(task_set, [claude_profiles[0]], concurrency=1, user=admin_user)
    services.advance(run.pk)  # the first task starts
    return run


@pytest.mark.django_db
def test_a_frame_is_rendered_only_while_a_socket_watches(redis, run_of_three, monkeypatch):  # noqa: F811 - the fixture
    sent = []
    monkeypatch.setattr(broadcast, "send_to_group", lambda group, message: sent.append((group, message["html"])))
    broadcast._redis().delete(broadcast._watchers_key(run_of_three.pk))
    broadcast.send_progress(run_of_three.pk)
    assert sent == []  # nobody watches: nothing rendered, nothing sent

    broadcast.add_watcher(run_of_three.pk)
    broadcast.send_progress(run_of_three.pk)
    (group, html), = sent
    assert group == broadcast.run_group(run_of_three.pk) and 'id="task-run-panel"' in html
    running = run_of_three.items.get(status=TaskRunItem.Status.RUNNING)
    # Only the cell that changed (the task that started), from the cell template, swapped in by its id.
    assert CELL.findall(html) == [(str(running.pk), "running")]

    broadcast.remove_watcher(run_of_three.pk)
    broadcast.send_progress(run_of_three.pk)
    assert len(sent) == 1


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_joining_socket_is_counted_and_gets_every_cell(redis, run_of_three, admin_user):  # noqa: F811 - the fixture
    key = broadcast._watchers_key(run_of_three.pk)
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/agenteval/runs/{run_of_three.pk}/")
    communicator.scope["user"] = admin_user
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    frame = await communicator.receive_from(timeout=5)
    assert sorted(status for _, status in CELL.findall(frame)) == ["pending", "pending", "running"]
    assert int(broadcast._redis().get(key)) == 1
    await communicator.disconnect()
    assert int(broadcast._redis().get(key)) == 0
