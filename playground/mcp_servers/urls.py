from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, EDITOR, PUBLIC, VIEWER, allow
from playground.mcp_servers import oauth_views, protocol_views, scratch_views, views

app_name = "mcp_servers"
# Who may use each route (see playground/urls.py): viewers read; anything that changes a server,
# connects to it (a stdio command runs on our hosts) or calls its tools is for admins. The workbench's
# ping, resources and prompts run the server's code too, so they are admin-only like tool calls; the
# call history and the live log show what the server returned and printed, so they are admin-only as
# well. The tool table fragment is the detail page's own data (no server code runs): viewers.
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
    "server_tools": allow(get=VIEWER),
    "tool_body": allow(get=VIEWER),
    "server_history": allow(get=ADMIN),
    "server_ping": allow(post=ADMIN),
    "resource_list": allow(post=ADMIN),
    "resource_read": allow(post=ADMIN),
    "prompt_list": allow(post=ADMIN),
    "prompt_get": allow(post=ADMIN),
    "server_request_answer": allow(post=ADMIN),
    "server_roots": allow(post=ADMIN),
    "resource_templates": allow(post=ADMIN),
    "resource_template_read": allow(post=ADMIN),
    "resource_subscribe": allow(post=ADMIN),
    "completion": allow(post=ADMIN),
    "server_log_level": allow(post=ADMIN),
    "history_rerun": allow(post=ADMIN),
    "server_export": allow(get=ADMIN),
    "server_import": allow(get=ADMIN, post=ADMIN),
    "server_protocol": allow(get=ADMIN),
    # Trying a server without registering it: a URL for editors, a command for admins (the view checks).
    "server_try": allow(get=EDITOR, post=EDITOR),
    "server_protocol_export": allow(get=ADMIN),
    # OAuth (oauth_views.py): the grant's card shows no credential (viewers: connected or not);
    # connecting, disconnecting and the callback the sign-in returns to are the admins'. The client
    # ID metadata document is what authorization servers fetch: public, and holds no secret.
    "server_oauth": allow(get=VIEWER),
    "server_oauth_connect": allow(post=ADMIN),
    "server_oauth_disconnect": allow(post=ADMIN),
    "oauth_callback": allow(get=ADMIN),
    "oauth_client_metadata": allow(get=PUBLIC),
}
urlpatterns = [
    path("", views.server_list, name="server_list"),
    path("new/", views.server_create, name="server_create"),
    path("import/", views.server_import, name="server_import"),
    path("try/", scratch_views.server_try, name="server_try"),
    path("<int:pk>/export/", views.server_export, name="server_export"),
    path("<int:pk>/", views.server_detail, name="server_detail"),
    path("<int:pk>/edit/", views.server_edit, name="server_edit"),
    path("<int:pk>/delete/", views.server_delete, name="server_delete"),
    path("<int:pk>/test/", views.server_test, name="server_test"),
    path("<int:pk>/sync/", views.server_sync, name="server_sync"),
    path("<int:pk>/sync/progress/", views.server_sync_progress, name="server_sync_progress"),
    path("<int:pk>/tools/<int:tool_pk>/call/", views.tool_call, name="tool_call"),
    path("<int:pk>/tools/", views.server_tools, name="server_tools"),
    path("<int:pk>/tools/<int:tool_pk>/body/", views.tool_body, name="tool_body"),
    path("<int:pk>/history/", views.server_history, name="server_history"),
    path("<int:pk>/history/<int:call_pk>/rerun/", views.history_rerun, name="history_rerun"),
    path("<int:pk>/ping/", views.server_ping, name="server_ping"),
    path("<int:pk>/resources/", views.resource_list, name="resource_list"),
    path("<int:pk>/resources/read/", views.resource_read, name="resource_read"),
    path("<int:pk>/resources/templates/", views.resource_templates, name="resource_templates"),
    path("<int:pk>/resources/templates/read/", views.resource_template_read, name="resource_template_read"),
    path("<int:pk>/resources/subscribe/", views.resource_subscribe, name="resource_subscribe"),
    path("<int:pk>/log-level/", views.server_log_level, name="server_log_level"),
    path("<int:pk>/complete/", views.completion, name="completion"),
    path("<int:pk>/prompts/", views.prompt_list, name="prompt_list"),
    path("<int:pk>/prompts/get/", views.prompt_get, name="prompt_get"),
    path("<int:pk>/protocol/", protocol_views.server_protocol, name="server_protocol"),
    path("<int:pk>/protocol/export/", protocol_views.server_protocol_export, name="server_protocol_export"),
    path("<int:pk>/roots/", views.server_roots, name="server_roots"),
    path("<int:pk>/requests/<int:request_pk>/answer/", views.server_request_answer, name="server_request_answer"),
    path("<int:pk>/oauth/", oauth_views.server_oauth, name="server_oauth"),
    path("<int:pk>/oauth/connect/", oauth_views.server_oauth_connect, name="server_oauth_connect"),
    path("<int:pk>/oauth/disconnect/", oauth_views.server_oauth_disconnect, name="server_oauth_disconnect"),
    path("oauth/callback/", oauth_views.oauth_callback, name="oauth_callback"),
    path("oauth/client-metadata.json", oauth_views.oauth_client_metadata, name="oauth_client_metadata"),
]
