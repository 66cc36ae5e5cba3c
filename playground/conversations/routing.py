from __future__ import annotations

from django.urls import path

from playground.access import VIEWER, allow_socket
from playground.conversations.consumers import ConversationConsumer

# Who may connect, by route (tests/test_authorisation_matrix.py): every role, to watch; what a socket
# may send (a message, an answer, a cancel) is the owner's or an admin's (consumers.py).
access_rules = {
    "ws/conversations/<int:pk>/": allow_socket(VIEWER),
}

websocket_urlpatterns: list = [
    path("ws/conversations/<int:pk>/", ConversationConsumer.as_asgi()),
]
