"""Live status: the consumer admits logged-in users only, and a sync's status changes arrive as
hx-swap-oob fragments over the real Redis channel layer."""
from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from playground.mcp_servers import services
from channels.routing import URLRouter

from playground.mcp_servers.routing import websocket_urlpatterns
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


async def connect(user, path: str = "/ws/mcp/status/") -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    return communicator


async def test_anonymous_sockets_are_refused_after_the_handshake_with_4401():
    # Like the conversation socket (playground.realtime): the browser sees the code and does not retry.
    communicator = await connect(AnonymousUser())
    connected, _ = await communicator.connect(timeout=5)
    assert connected and (await communicator.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}
    await communicator.disconnect(timeout=5)  # let the consumer finish here, not be cancelled at the loop's teardown


async def test_a_sync_pushes_pending_then_connected_badges(django_user_model, caplog):
    require_service(redis_answers(), "Redis (channel layer)")
    user = await database_sync_to_async(django_user_model.objects.create_user)("carol", password="pw-carol-123")
    server = await database_sync_to_async(McpServer.objects.create)(
        name="demo", command=__import__("sys").executable, args=["-m", "playground.mcp_servers.demo_server"]
    )
    listing = await connect(user)
    detail = await connect(user, f"/ws/mcp/status/{server.pk}/")
    assert (await listing.connect(timeout=5))[0] and (await detail.connect(timeout=5))[0]
    try:
        result = await database_sync_to_async(services.sync_server, thread_sensitive=False)(server)
        assert result.ok, result.error
        assert "could not broadcast" not in caplog.text, caplog.text
        # Generous timeouts: the machine running the suite may be busy; the messages are already queued.
        first, second = await listing.receive_from(timeout=30), await listing.receive_from(timeout=30)
        detail_first, detail_second = await detail.receive_from(timeout=30), await detail.receive_from(timeout=30)
    finally:
        await listing.disconnect()
        await detail.disconnect()
    assert f'<tr id="mcp-row-{server.pk}"' in first and 'hx-swap-oob="true"' in first
    assert 'data-status="pending"' in first
    assert 'data-status="connected"' in second and "<td class=\"num\">15" in second  # the row's tool count too
    assert "mcp-sync-summary" not in first + second  # the list page has no summary to replace
    assert 'data-status="pending"' in detail_first
    assert f'id="mcp-sync-summary-{server.pk}"' in detail_second and 'data-status="connected"' in detail_second


@pytest.mark.slow
async def test_an_idle_socket_outlives_the_channel_layers_blocking_receive(django_user_model):
    """channels-redis blocks 5 s per receive; with redis-py 8's default 5 s read timeout an idle
    consumer crashed ("Timeout reading"). settings gives reads headroom: this socket idles 7 s."""
    import asyncio

    from playground.mcp_servers.status import broadcast_server_status

    require_service(redis_answers(), "Redis (channel layer)")
    user = await database_sync_to_async(django_user_model.objects.create_user)("dave", password="pw-dave-1234")
    server = await database_sync_to_async(McpServer.objects.create)(name="idle", command="x", status="connected")
    listing = await connect(user)
    assert (await listing.connect(timeout=5))[0]
    try:
        await asyncio.sleep(7)
        await database_sync_to_async(broadcast_server_status, thread_sensitive=False)(server.pk)
        message = await listing.receive_from(timeout=30)
    finally:
        await listing.disconnect()
    assert 'data-server="idle"' in message and 'data-status="connected"' in message
