from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, allow
from playground.gateway import views

app_name = "gateway"
# Who may use each route (see playground/urls.py): the gateway's tokens and sessions are for admins.
# (The MCP endpoint itself is not a URL pattern: endpoint.py serves it in front of Django, by token.)
access_rules = {
    "session_list": allow(get=ADMIN),
    "session_detail": allow(get=ADMIN),
    "session_protocol": allow(get=ADMIN),
    "session_protocol_export": allow(get=ADMIN),
    "prompt_answer": allow(post=ADMIN),
    "token_list": allow(get=ADMIN, post=ADMIN),
    "token_revoke": allow(post=ADMIN),
}
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/<int:pk>/", views.session_detail, name="session_detail"),
    path("sessions/<int:pk>/protocol/", views.session_protocol, name="session_protocol"),
    path("sessions/<int:pk>/protocol/export/", views.session_protocol_export, name="session_protocol_export"),
    path("prompts/<int:pk>/answer/", views.prompt_answer, name="prompt_answer"),
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]
