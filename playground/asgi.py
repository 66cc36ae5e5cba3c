"""ASGI entry point: HTTP through Django (and the MCP gateway), WebSockets through Channels (auth + origin checked)."""
from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from django.core.asgi import get_asgi_application

# Settings read this while Django starts here, and only here: the web process gets a connection
# pool on PostgreSQL (settings.py). Removed at once, so processes started later (an MCP server, or a
# test's Celery worker when a test imports this module) do not inherit it.
os.environ["PLAYGROUND_ASGI_PROCESS"] = "1"
try:
    django_asgi_app = get_asgi_application()
finally:
    os.environ.pop("PLAYGROUND_ASGI_PROCESS", None)

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator

from playground.gateway.endpoint import with_gateway
from playground.routing import websocket_urlpatterns

application = ProtocolTypeRouter(
    {
        # /gateway/mcp/<profile id>/ is an MCP endpoint (the mcp SDK), everything else Django.
        "http": with_gateway(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
