from __future__ import annotations

from django.contrib import admin
from django.db import models

from playground.mcp_servers.models import McpServer


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ["name", "transport", "enabled", "status", "last_synced_at"]
    list_filter = ["transport", "status", "enabled"]
    search_fields = ["name", "command", "url"]
    # Secrets (env, headers) are edited on the playground's own form, which masks them.
    exclude = ["env", "headers"]
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    readonly_fields = ["status", "last_error", "last_synced_at", "last_attempt_at", "last_sync_result", "sync_warnings", "tool_names"]
