from __future__ import annotations

from django.urls import path

from playground.gateway import views

app_name = "gateway"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/<int:pk>/", views.session_detail, name="session_detail"),
    path("sessions/<int:pk>/events/", views.session_events, name="session_events"),
    path("prompts/<int:pk>/answer/", views.prompt_answer, name="prompt_answer"),
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]
