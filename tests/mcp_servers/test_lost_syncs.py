"""MCP syncs whose task the broker lost: sent again by the worker's watch, then failed with a reason
the page shows (playground/lost_tasks.py). The broker is a list the test fills."""
from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from playground import lost_tasks
from playground.mcp_servers import services, tasks
from playground.mcp_servers.models import McpServer
from tests.lost_task_fakes import GRACE, capture_sent, fake_broker, queue_settings  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    return capture_sent(monkeypatch, tasks.sync_server_task)


@pytest.fixture
def broker(monkeypatch):
    return fake_broker(monkeypatch, "mcp_servers.sync_server")


def requested(name: str, *, age: float, **fields) -> McpServer:
    """A server whose sync was requested `age` seconds ago and that no worker started."""
    server = McpServer.objects.create(name=name, command=sys.executable, args=["-m", "playground.mcp_servers.demo_server"],
                                      status="connected", last_sync_result={"ok": True, "tool_count": 8})
    services.request_sync(server)
    McpServer.objects.filter(pk=server.pk).update(sync_queued_at=timezone.now() - timedelta(seconds=age), **fields)
    return server


def two_rounds() -> dict[str, int]:
    _, missing = lost_tasks.lost_round({}, [services.LOST_SYNCS])
    outcome, _ = lost_tasks.lost_round(missing, [services.LOST_SYNCS])
    return outcome


def test_a_sync_the_broker_lost_is_sent_again(sent, broker, django_capture_on_commit_callbacks):
    server = requested("lost", age=GRACE + 5)
    assert server.status == "pending"
    with django_capture_on_commit_callbacks(execute=True):
        assert two_rounds() == {"requeued": 1, "failed": 0}
    server.refresh_from_db()
    assert sent == [server.pk] and server.status == "pending" and server.sync_attempts == 1
    assert timezone.now() - server.sync_queued_at < timedelta(seconds=5)


def test_a_sync_held_young_or_started_is_left_alone(sent, broker):
    held = requested("held", age=GRACE + 60)
    broker.append(held.pk)
    young = requested("young", age=GRACE - 5)
    young_since = McpServer.objects.get(pk=young.pk).sync_queued_at
    started = requested("started", age=GRACE + 60)
    services.claim_sync(started.pk)  # what the task does first
    assert two_rounds() == {"requeued": 0, "failed": 0} and sent == []
    assert McpServer.objects.get(pk=started.pk).sync_queued_at is None
    assert McpServer.objects.get(pk=young.pk).sync_queued_at == young_since is not None  # still waiting its turn


def test_after_the_last_attempt_the_sync_fails_and_the_page_says_why(sent, broker, admin_client):
    server = requested("gone", age=GRACE + 5, sync_attempts=2)
    assert two_rounds() == {"requeued": 0, "failed": 1} and sent == []
    server.refresh_from_db()
    assert server.status == "failed" and server.sync_queued_at is None
    assert "No worker ran this sync" in server.last_error and "sent again 2 time(s)" in server.last_error
    assert server.last_sync_result["ok"] is False  # not the earlier, successful sync
    body = admin_client.get(reverse("mcp_servers:server_sync_progress", args=[server.pk])).content.decode()
    assert "Sync failed." in body and "the message broker lost its task" in body
    # Sync again: queued afresh, with all its re-sends.
    services.request_sync(server)
    server.refresh_from_db()
    assert server.status == "pending" and server.sync_attempts == 0 and server.sync_queued_at is not None
