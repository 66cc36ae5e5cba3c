"""What Anthropic's wire styles share: the Messages API body, with the profile's cache breakpoints."""
from __future__ import annotations

from typing import Any

from playground.engine.prompt_cache import with_cache_breakpoints
from playground.engine.wires.base import WireStyle
from playground.engine.wires.vendors import ANTHROPIC


class AnthropicWire(WireStyle):
    """A Messages API style: `messages_body` builds the `messages.create` keyword arguments; when the
    profile caches (`settings.prompt_cache`), `cache_control` goes at the end of the tools prefix, the
    system prompt and the conversation's tail (`prompt_cache.with_cache_breakpoints`)."""

    vendor = ANTHROPIC

    def messages_body(self, turn: Any) -> dict[str, Any]:
        """The plan as it stands: the planning shape already wrote defer_loading and tool_reference
        blocks (native) or ordinary tools and text (client)."""
        return turn.request.to_api_kwargs()

    def build_request(self, turn: Any) -> dict[str, Any]:
        body = self.messages_body(turn)
        if turn.settings.prompt_cache:
            return with_cache_breakpoints(body, turn.settings.prompt_cache_ttl)
        return body
