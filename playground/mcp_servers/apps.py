from django.apps import AppConfig


class McpServersConfig(AppConfig):
    name = "playground.mcp_servers"
    verbose_name = "MCP servers"
