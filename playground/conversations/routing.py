from __future__ import annotations

from django.urls import path

from playground.access import OPERATOR, allow_socket
from playground.conversations.consumers import ConversationConsumer

# Who may connect, by route (tests/test_authorisation_matrix.py): the owner (an operator at least) or an admin.
access_rules = {
    "ws/conversations/<int:pk>/": allow_socket(OPERATOR, owned=True),
}

websocket_urlpatterns: list = [
    path("ws/conversations/<int:pk>/", ConversationConsumer.as_asgi()),
]
