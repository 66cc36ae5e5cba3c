from __future__ import annotations

from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "playground.gateway"
    label = "gateway"
    verbose_name = "MCP gateway"
