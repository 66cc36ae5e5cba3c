from __future__ import annotations

from django.urls import path

from playground.access import OPERATOR, allow
from playground.inbox import views

app_name = "inbox"
# Who may use each route (see playground/urls.py): the inbox lists the prompts its user may answer.
access_rules = {
    "index": allow(get=OPERATOR),
}
urlpatterns = [
    path("", views.inbox, name="index"),
]
