from __future__ import annotations

from django.urls import path

from playground.access import EDITOR, VIEWER, allow
from playground.registry.views import imports, inspector, permissions, profiles, tools

app_name = "registry"
# Who may use each route (see playground/urls.py): viewers read, editors change.
access_rules = {
    "tool_list": allow(get=VIEWER),
    "search_index": allow(get=VIEWER),
    "tool_servers": allow(get=VIEWER),
    "tool_create": allow(get=EDITOR, post=EDITOR),
    "tool_bulk": allow(post=EDITOR),
    "tool_import": allow(get=EDITOR, post=EDITOR),
    "tool_import_commit": allow(post=EDITOR),
    "tool_export": allow(get=VIEWER),
    "tool_detail": allow(get=VIEWER),
    "tool_edit": allow(get=EDITOR, post=EDITOR),
    "inspector": allow(get=VIEWER, post=VIEWER, note="a POST searches too: it carries a query too long for a URL"),
    "usage_forget": allow(post=EDITOR),
    "model_view": allow(get=VIEWER),
    "permissions": allow(get=EDITOR),
    "settings_import": allow(get=EDITOR, post=EDITOR),
    "settings_export": allow(get=EDITOR),
    "rule_create": allow(post=EDITOR),
    "rule_row": allow(get=EDITOR),
    "rule_edit": allow(get=EDITOR, post=EDITOR),
    "rule_delete": allow(post=EDITOR),
    "permission_test": allow(get=EDITOR),
    "permission_history": allow(get=EDITOR),
    "profile_list": allow(get=VIEWER),
    "profile_create": allow(get=EDITOR, post=EDITOR),
    "profile_detail": allow(get=VIEWER),
    "profile_edit": allow(get=EDITOR, post=EDITOR),
}
urlpatterns = [
    path("tools/", tools.tool_list, name="tool_list"),
    path("tools/new/", tools.tool_create, name="tool_create"),
    path("tools/bulk/", tools.tool_bulk, name="tool_bulk"),
    path("tools/search-index/", tools.search_index, name="search_index"),
    path("tools/servers/", tools.tool_servers, name="tool_servers"),
    path("tools/import/", imports.tool_import, name="tool_import"),
    path("tools/import/<int:pk>/commit/", imports.tool_import_commit, name="tool_import_commit"),
    path("tools/export/", imports.tool_export, name="tool_export"),
    path("tools/<int:pk>/", tools.tool_detail, name="tool_detail"),
    path("tools/<int:pk>/edit/", tools.tool_edit, name="tool_edit"),
    path("inspector/", inspector.inspector, name="inspector"),
    path("inspector/usage/forget/", inspector.usage_forget, name="usage_forget"),
    path("model/", inspector.model_view, name="model_view"),
    path("permissions/", permissions.permissions, name="permissions"),
    path("permissions/rules/new/", permissions.rule_create, name="rule_create"),
    path("permissions/rules/<int:pk>/", permissions.rule_row, name="rule_row"),
    path("permissions/rules/<int:pk>/edit/", permissions.rule_edit, name="rule_edit"),
    path("permissions/rules/<int:pk>/delete/", permissions.rule_delete, name="rule_delete"),
    path("permissions/test/", permissions.permission_test, name="permission_test"),
    path("permissions/history/", permissions.permission_history, name="permission_history"),
    path("permissions/claude-settings/import/", permissions.settings_import, name="settings_import"),
    path("permissions/claude-settings/export.json", permissions.settings_export, name="settings_export"),
    path("profiles/", profiles.profile_list, name="profile_list"),
    path("profiles/new/", profiles.profile_create, name="profile_create"),
    path("profiles/<int:pk>/", profiles.profile_detail, name="profile_detail"),
    path("profiles/<int:pk>/edit/", profiles.profile_edit, name="profile_edit"),
]
