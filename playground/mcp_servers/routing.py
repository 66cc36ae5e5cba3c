from __future__ import annotations

from django.urls import path

from playground.access import VIEWER, allow_socket
from playground.mcp_servers.consumers import McpStatusConsumer

# Who may connect, by route (tests/test_authorisation_matrix.py): the status badges are for every viewer.
# On a server's socket, admins also get its live log (stderr, log messages); the consumer checks that.
access_rules = {
    "ws/mcp/status/": allow_socket(VIEWER),
    "ws/mcp/status/<int:server_id>/": allow_socket(VIEWER),
}

websocket_urlpatterns: list = [
    path("ws/mcp/status/", McpStatusConsumer.as_asgi()),
    path("ws/mcp/status/<int:server_id>/", McpStatusConsumer.as_asgi()),
]
