from __future__ import annotations

from django.urls import path

from playground.conversations import views

app_name = "conversations"
urlpatterns: list = [
    path("", views.conversation_list, name="list"),
    path("new/", views.conversation_new, name="new"),
    path("<int:pk>/", views.conversation_detail, name="detail"),
    path("<int:pk>/export.json", views.conversation_export, name="export"),
    path("<int:pk>/send/", views.conversation_send, name="send"),
    path("<int:pk>/answer/", views.conversation_answer, name="answer"),
    path("<int:pk>/cancel/", views.conversation_cancel, name="cancel"),
    path("compare/", views.compare, name="compare"),
    path("compare/<str:group>/", views.compare_view, name="compare_view"),
]
