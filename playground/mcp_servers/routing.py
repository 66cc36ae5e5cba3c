from __future__ import annotations

from django.urls import path

from playground.mcp_servers.consumers import McpStatusConsumer

websocket_urlpatterns: list = [
    path("ws/mcp/status/", McpStatusConsumer.as_asgi()),
    path("ws/mcp/status/<int:server_id>/", McpStatusConsumer.as_asgi()),
]
