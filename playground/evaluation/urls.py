from __future__ import annotations

from django.urls import path

from playground.access import EDITOR, VIEWER, allow
from playground.evaluation import views

app_name = "evaluation"
# Who may use each route (see playground/urls.py): viewers read results, editors start runs.
access_rules = {
    "index": allow(get=VIEWER, post=EDITOR),
    "detail": allow(get=VIEWER),
    "progress": allow(get=VIEWER),
    "learned": allow(get=VIEWER, post=EDITOR),
}
urlpatterns = [
    path("", views.index, name="index"),
    path("runs/<int:pk>/", views.detail, name="detail"),
    path("runs/<int:pk>/progress/", views.progress, name="progress"),
    path("learned/", views.learned, name="learned"),
]
