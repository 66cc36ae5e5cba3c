"""WebSocket URL patterns, one list gathered from the apps that serve sockets."""
from __future__ import annotations

from playground.agenteval.routing import websocket_urlpatterns as task_run_sockets
from playground.conversations.routing import websocket_urlpatterns as conversation_sockets
from playground.gateway.routing import websocket_urlpatterns as gateway_sockets
from playground.inbox.routing import websocket_urlpatterns as inbox_sockets
from playground.mcp_servers.routing import websocket_urlpatterns as mcp_status_sockets

websocket_urlpatterns = [*conversation_sockets, *mcp_status_sockets, *gateway_sockets, *task_run_sockets, *inbox_sockets]
