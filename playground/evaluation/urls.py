from __future__ import annotations

from django.urls import path

from playground.evaluation import views

app_name = "evaluation"
urlpatterns = [
    path("", views.index, name="index"),
    path("runs/<int:pk>/", views.detail, name="detail"),
    path("runs/<int:pk>/progress/", views.progress, name="progress"),
]
