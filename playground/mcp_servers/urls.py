from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, VIEWER, allow
from playground.mcp_servers import views

app_name = "mcp_servers"
# Who may use each route (see playground/urls.py): viewers read; anything that changes a server,
# connects to it (a stdio command runs on our hosts) or calls its tools is for admins.
access_rules = {
    "server_list": allow(get=VIEWER),
    "server_create": allow(get=ADMIN, post=ADMIN),
    "server_detail": allow(get=VIEWER),
    "server_edit": allow(get=ADMIN, post=ADMIN),
    "server_delete": allow(post=ADMIN),
    "server_test": allow(post=ADMIN),
    "server_sync": allow(post=ADMIN),
    "server_sync_progress": allow(get=VIEWER),
    "tool_call": allow(post=ADMIN),
}
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
