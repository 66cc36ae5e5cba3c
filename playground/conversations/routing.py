from __future__ import annotations

from django.urls import path

from playground.conversations.consumers import ConversationConsumer

websocket_urlpatterns: list = [
    path("ws/conversations/<int:pk>/", ConversationConsumer.as_asgi()),
]
