from __future__ import annotations

from django.urls import path

app_name = "conversations"
urlpatterns: list = []
