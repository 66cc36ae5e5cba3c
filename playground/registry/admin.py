from __future__ import annotations

from django.contrib import admin

from playground.registry.models import AgentProfile, PermissionChange, PermissionRule, Tool, ToolImport


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "server_name", "source", "deferred", "always_load", "enabled", "token_estimate", "updated_at")
    list_filter = ("source", "deferred", "always_load", "enabled")
    search_fields = ("name", "description", "server_name")
    readonly_fields = ("token_estimate", "deferred", "created_at", "updated_at")
    list_select_related = ("server",)


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "tool_search_mode", "wire_style", "search_backend", "max_results", "is_subagent")


@admin.register(PermissionRule)
class PermissionRuleAdmin(admin.ModelAdmin):
    list_display = ("effect", "pattern", "profile", "note", "changed_by", "changed_at")
    list_filter = ("effect", "profile")
    search_fields = ("pattern", "note")


@admin.register(PermissionChange)
class PermissionChangeAdmin(admin.ModelAdmin):
    list_display = ("changed_at", "action", "rule_id", "changed_by")
    readonly_fields = ("rule_id", "action", "before", "after", "changed_by", "changed_at")

    def has_add_permission(self, request) -> bool:  # the audit trail is written by the editor only
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ToolImport)
class ToolImportAdmin(admin.ModelAdmin):
    list_display = ("pk", "filename", "status", "created_by", "created_at", "committed_at")
    exclude = ("payload",)
    readonly_fields = ("filename", "server_name", "status", "summary", "created_by", "created_at", "committed_at")
