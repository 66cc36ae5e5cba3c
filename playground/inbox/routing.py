from __future__ import annotations

from django.urls import path

from playground.access import OPERATOR, allow_socket
from playground.inbox.consumers import PromptInboxConsumer

# Who may connect (tests/test_authorisation_matrix.py): operators and above, who may answer prompts
# (their own conversations'; an admin's also every conversation's and the gateway's).
access_rules = {
    "ws/inbox/": allow_socket(OPERATOR),
}

websocket_urlpatterns: list = [
    path("ws/inbox/", PromptInboxConsumer.as_asgi()),
]
