from __future__ import annotations

from django.contrib import admin

from playground.conversations.models import ToolSearchUsage


@admin.register(ToolSearchUsage)
class ToolSearchUsageAdmin(admin.ModelAdmin):
    """Learned searches one by one: an admin removes a misleading one here (the inspector's
    "Forget" removes them all)."""

    list_display = ("tool_name", "query", "conversation", "created_at")
    search_fields = ("tool_name", "query")
    readonly_fields = ("conversation", "query", "query_hash", "tool_name", "created_at")
    list_select_related = ("conversation",)

    def has_add_permission(self, request) -> bool:  # evidence comes from runs only
        return False
