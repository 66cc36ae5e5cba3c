from __future__ import annotations

from django.urls import path

from playground.mcp_servers import views

app_name = "mcp_servers"
urlpatterns = [
    path("", views.server_list, name="server_list"),
    path("new/", views.server_create, name="server_create"),
    path("<int:pk>/", views.server_detail, name="server_detail"),
    path("<int:pk>/edit/", views.server_edit, name="server_edit"),
    path("<int:pk>/delete/", views.server_delete, name="server_delete"),
    path("<int:pk>/test/", views.server_test, name="server_test"),
    path("<int:pk>/sync/", views.server_sync, name="server_sync"),
    path("<int:pk>/sync/progress/", views.server_sync_progress, name="server_sync_progress"),
    path("<int:pk>/tools/<int:tool_pk>/call/", views.tool_call, name="tool_call"),
]
