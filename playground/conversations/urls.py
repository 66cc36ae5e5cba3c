from __future__ import annotations

from django.urls import path

from playground.access import OPERATOR, allow
from playground.conversations import views

app_name = "conversations"
# Who may use each route (see playground/urls.py): operators their own conversations, admins anyone's
# (`owned`: anyone else gets a 404).
access_rules = {
    "list": allow(get=OPERATOR),
    "new": allow(get=OPERATOR, post=OPERATOR),
    "detail": allow(get=OPERATOR, owned=True),
    "export": allow(get=OPERATOR, owned=True),
    "send": allow(post=OPERATOR, owned=True),
    "answer": allow(post=OPERATOR, owned=True),
    "cancel": allow(post=OPERATOR, owned=True),
    "compare": allow(get=OPERATOR, post=OPERATOR),
    "compare_view": allow(get=OPERATOR, owned=True),
}
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
