from __future__ import annotations

from django.urls import path

app_name = "mcp_servers"
urlpatterns: list = []
