from __future__ import annotations

from django.urls import path

from playground.access import VIEWER, allow_socket
from playground.agenteval.consumers import TaskRunConsumer

# Who may connect (tests/test_authorisation_matrix.py): a run's figures are for every viewer, as evaluation results are.
access_rules = {
    "ws/agenteval/runs/<int:pk>/": allow_socket(VIEWER),
}

websocket_urlpatterns: list = [
    path("ws/agenteval/runs/<int:pk>/", TaskRunConsumer.as_asgi()),
]
