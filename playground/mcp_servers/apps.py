from django.apps import AppConfig


class McpServersConfig(AppConfig):
    name = "playground.mcp_servers"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from playground.mcp_servers.secrets import forget_process_secrets

        # A changed key (override_settings in tests, or a settings reload) is scrubbed from then on.
        setting_changed.connect(forget_process_secrets, dispatch_uid="forget_process_secrets")
