from django.apps import AppConfig


class McpServersConfig(AppConfig):
    name = "playground.mcp_servers"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from playground.mcp_servers.builtin_tools import BUILTIN_TOOLS
        from playground.mcp_servers.secrets import forget_process_secrets
        from playground.registry.models import register_runnable_builtins

        # The tool pages say which built-ins run here and which only answer with a simulated result.
        register_runnable_builtins(BUILTIN_TOOLS)

        # A changed key (override_settings in tests, or a settings reload) is scrubbed from then on.
        setting_changed.connect(forget_process_secrets, dispatch_uid="forget_process_secrets")
