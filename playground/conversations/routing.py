from __future__ import annotations

from django.urls import path

from playground.access import PUBLIC, VIEWER, allow_socket
from playground.conversations.consumers import ConversationConsumer, SharedConversationConsumer

# Who may connect, by route (tests/test_authorisation_matrix.py): every role, to watch; what a socket
# may send (a message, an answer, a cancel) is the owner's or an admin's (consumers.py).
access_rules = {
    "ws/conversations/<int:pk>/": allow_socket(VIEWER),
    # A share link's socket: anyone holding a working link, logged in or not (a refused link: 4403).
    "ws/shared/<str:token>/": allow_socket(PUBLIC),
}

websocket_urlpatterns: list = [
    path("ws/conversations/<int:pk>/", ConversationConsumer.as_asgi()),
    path("ws/shared/<str:token>/", SharedConversationConsumer.as_asgi()),
]
