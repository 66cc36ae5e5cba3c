from __future__ import annotations

from django.urls import path

from playground.access import OPERATOR, VIEWER, allow
from playground.conversations import views

app_name = "conversations"
# Who may use each route (see playground/urls.py): every role watches every conversation (list,
# page, export, compare view), read-only; operators start their own; sending, answering and
# cancelling are the owner's or an admin's (`owned`: anyone else gets a 404).
access_rules = {
    "list": allow(get=VIEWER),
    "new": allow(get=OPERATOR, post=OPERATOR),
    "detail": allow(get=VIEWER),
    "export": allow(get=VIEWER),
    "send": allow(post=OPERATOR, owned=True),
    "answer": allow(post=OPERATOR, owned=True),
    "cancel": allow(post=OPERATOR, owned=True),
    "compare": allow(get=OPERATOR, post=OPERATOR),
    "compare_view": allow(get=VIEWER),
    "compare_figures": allow(get=VIEWER),
    "overview": allow(get=VIEWER),
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
    path("compare/<str:group>/figures/", views.compare_figures, name="compare_figures"),
    path("overview/", views.usage_overview, name="overview"),
]
