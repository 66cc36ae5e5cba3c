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
from django.conf import settings
from django.urls import get_resolver

from playground.conversations.providers import provider_class
from playground.routing import websocket_urlpatterns

# Import every view and model provider now, while the process starts, not on a first request: Django
# resolves the URLconf lazily and providers are found by dotted path, and importing them (the engine,
# the search backends) made the first page a person opened after a start take seconds (issue 46: 7.4 s
# for Conversations, whose form lists the providers). The anthropic and openai SDKs are not imported
# here: a provider imports its SDK when it makes a client (in the worker); the web process reads facts.
URL_PATTERNS = get_resolver().url_patterns
PROVIDER_CLASSES = {key: provider_class(key) for key in settings.MODEL_PROVIDERS}

# A URL longer than this is answered 414 with a message (the inspector sends long queries by POST).
# The web server lets lines up to 64 KB through so that this limit, not a dropped connection, answers.
MAX_URL_BYTES = 8 * 1024


def with_url_limit(app):
    async def limited(scope, receive, send):
        length = len(scope.get("raw_path") or scope.get("path", "").encode()) + len(scope.get("query_string") or b"")
        if scope["type"] == "http" and length > MAX_URL_BYTES:
            body = (f"URI too long: this address is {length:,} bytes, the limit is {MAX_URL_BYTES:,}. "
                    "Send long input in a form (POST); the inspector does so by itself.").encode()
            await send({"type": "http.response.start", "status": 414, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return limited


application = ProtocolTypeRouter(
    {
        # /gateway/mcp/<profile id>/ is an MCP endpoint (the mcp SDK), everything else Django.
        "http": with_url_limit(with_gateway(django_asgi_app)),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
