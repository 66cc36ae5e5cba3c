"""ASGI entry point: HTTP through Django (and the MCP gateway), WebSockets through Channels (auth + origin checked)."""
from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

# Settings read this while Django starts here, and only here: the web process gets a connection
# pool on PostgreSQL (settings.py). Removed at once, so processes started later (an MCP server, or a
# test's Celery worker when a test imports this module) do not inherit it.
os.environ["PLAYGROUND_ASGI_PROCESS"] = "1"
try:
    django_asgi_app = get_asgi_application()
finally:
    os.environ.pop("PLAYGROUND_ASGI_PROCESS", None)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from playground.gateway.endpoint import with_gateway  # noqa: E402
from playground.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # /gateway/mcp/<profile id>/ is an MCP endpoint (the mcp SDK), everything else Django.
        "http": with_gateway(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
