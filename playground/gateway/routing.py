from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, allow_socket
from playground.gateway.consumers import GatewaySessionConsumer

# Who may connect, by route (tests/test_authorisation_matrix.py): a session's live events are for
# admins, as its page is.
access_rules = {
    "ws/gateway/sessions/<int:pk>/": allow_socket(ADMIN),
}

websocket_urlpatterns: list = [
    path("ws/gateway/sessions/<int:pk>/", GatewaySessionConsumer.as_asgi()),
]
