"""Live status: the consumer admits logged-in users only, and a sync's status changes arrive as
hx-swap-oob fragments over the real Redis channel layer."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from playground.mcp_servers import services
from playground.mcp_servers.consumers import McpStatusConsumer
from playground.mcp_servers.models import McpServer
from tests.conftest import require_service

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def redis_answers() -> bool:
    import redis
    from django.conf import settings

    try:
        return bool(redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001
        return False


async def connect(user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(McpStatusConsumer.as_asgi(), "/ws/mcp/status/")
    communicator.scope["user"] = user
    return communicator


async def test_anonymous_sockets_are_refused():
    communicator = await connect(AnonymousUser())
    connected, code = await communicator.connect(timeout=5)
    assert not connected and code == 4401


async def test_a_sync_pushes_pending_then_connected_badges(django_user_model):
    require_service(redis_answers(), "Redis (channel layer)")
    user = await sync_to_async(django_user_model.objects.create_user)("carol", password="pw-carol-123")
    server = await sync_to_async(McpServer.objects.create)(
        name="demo", command=__import__("sys").executable, args=["-m", "playground.mcp_servers.demo_server"]
    )
    communicator = await connect(user)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    try:
        result = await sync_to_async(services.sync_server, thread_sensitive=False)(server)
        assert result.ok, result.error
        first = await communicator.receive_from(timeout=10)
        second = await communicator.receive_from(timeout=10)
    finally:
        await communicator.disconnect()
    assert f'id="mcp-status-{server.pk}"' in first and 'data-status="pending"' in first and 'hx-swap-oob="true"' in first
    assert 'data-status="connected"' in second
    assert f'id="mcp-sync-summary-{server.pk}"' in second
