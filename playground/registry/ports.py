"""What registry pages show but an app above the registry owns, handed in when that app starts.

Apps import one way (engine ← registry ← mcp_servers ← conversations / evaluation), yet a few registry
pages show conversation data: the inspector and the tool page show what conversations taught
ToolSearch (the usage log), and the profile form and page name the model providers. The conversations
app registers its modules here from `AppConfig.ready()`; until it does, the registry sees no usage and
only the automatic provider.
"""
from __future__ import annotations

from typing import Any, Protocol

from playground.engine.search.usage import UsageLog


class UsageSource(Protocol):
    """`playground.conversations.usage` satisfies this."""

    def learning_enabled(self) -> bool: ...

    def usage_log(self) -> UsageLog | None: ...

    def queries_for_tool(self, tool_name: str, *, user: Any = None, limit: int = 25) -> list[Any]: ...

    def forget_usage(self) -> int: ...


class ProviderSource(Protocol):
    """`playground.conversations.providers` satisfies this."""

    def provider_choices(self) -> list[tuple[str, str]]: ...

    def provider_class(self, key: str) -> Any: ...  # a class with `label`, `wire_styles` and `unavailable_reason()`

    def provider_label(self, key: str) -> str: ...


class _NoUsage:
    def learning_enabled(self) -> bool:
        return False

    def usage_log(self) -> UsageLog | None:
        return None

    def queries_for_tool(self, tool_name: str, *, user: Any = None, limit: int = 25) -> list[Any]:
        return []

    def forget_usage(self) -> int:
        return 0


class _AutomaticOnly:
    def provider_choices(self) -> list[tuple[str, str]]:
        return [("", "Automatic")]

    def provider_class(self, key: str) -> Any:
        raise LookupError(f"no model providers are registered (asked for {key!r})")

    def provider_label(self, key: str) -> str:
        return key


_usage: UsageSource = _NoUsage()
_providers: ProviderSource = _AutomaticOnly()


def register(*, usage: UsageSource | None = None, providers: ProviderSource | None = None) -> None:
    global _usage, _providers
    if usage is not None:
        _usage = usage
    if providers is not None:
        _providers = providers


def usage() -> UsageSource:
    return _usage


def providers() -> ProviderSource:
    return _providers
