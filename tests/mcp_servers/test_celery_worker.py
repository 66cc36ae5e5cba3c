"""The sync task on a real Celery worker (solo pool, in a thread) over the Redis broker."""
from __future__ import annotations

import sys
import time

import pytest
from celery.contrib.testing.worker import start_worker

from playground.celery_app import app
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.tasks import sync_server_task
from playground.registry.models import Tool
from tests.conftest import require_service
from tests.mcp_servers.test_status_push import redis_answers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_worker_runs_the_sync_task():
    require_service(redis_answers(), "Redis (Celery broker)")
    server = McpServer.objects.create(
        name="demo", command=sys.executable, args=["-m", "playground.mcp_servers.demo_server"], status="failed"
    )
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        sync_server_task.delay(server.pk)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            server.refresh_from_db()
            if server.status == McpServer.Status.CONNECTED:
                break
            time.sleep(0.2)
    assert server.status == McpServer.Status.CONNECTED, server.last_error
    assert Tool.objects.filter(server=server).count() == 15
