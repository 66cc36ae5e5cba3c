from __future__ import annotations

from django.contrib import admin

from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession, GatewayToken


@admin.register(GatewayToken)
class GatewayTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "profile", "prefix", "created_at", "last_used_at", "revoked_at")
    # Tokens are created on the gateway's tokens page (shown once there); the admin only reads them.
    readonly_fields = ("token_hash", "prefix", "created_by", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(GatewaySession)
class GatewaySessionAdmin(admin.ModelAdmin):
    list_display = ("session_id", "profile", "client_name", "client_version", "created_at", "last_seen_at")


admin.site.register(GatewayEvent)
admin.site.register(GatewayPrompt)
