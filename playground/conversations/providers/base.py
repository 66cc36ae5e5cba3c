"""The model provider seam: one base class, implementations picked by dotted path in settings.

`settings.MODEL_PROVIDERS` maps a key to a dotted path; `get_provider(key)` builds it with
`from_settings()`. The loop only ever calls `create()` (and `summarise()` for compaction), so the
offline demo agent and Claude go through exactly the same loop, events and executor.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from playground.engine.execution import CancelSignal
from playground.engine.history import blocks_of, result_content
from playground.engine.requests import AgentSettings
from playground.engine.server_search import PROFILE_WIRE_STYLES

# Called with each piece of assistant text as the model writes it (`stream_or_cancel`), in the
# thread that called the provider.
TextSink = Callable[[str], None]


@dataclass
class ProviderResponse:
    """One assistant turn as the loop needs it, in Messages API shapes (plain dicts)."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)  # input, output, cache_read, cache_write
    model: str = ""
    response_id: str = ""
    # "reported": `usage` is the API's; "estimate": the engine's count (a provider with no usage of its own).
    usage_source: str = "reported"

    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text").strip()


class ProviderError(Exception):
    """The provider gave up (after its own retries). The loop turns it into an error event."""

    def __init__(self, message: str, *, kind: str = "api_error", status_code: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status_code = status_code
        self.retryable = retryable


class ModelProvider(ABC):
    """Base class of model providers.

    Subclasses set `key` and `label` (shown in the UI), implement `create`, and may override
    `summarise` (compaction) and `from_settings`. `create` receives the keyword arguments of
    `client.messages.create` exactly as the engine's `TurnPlan.wire_request()` built them
    (model, max_tokens, system, messages, tools) and must either return a ProviderResponse or raise
    ProviderError — never hang: network providers set timeouts and bounded retries.
    """

    key: str = "base"
    label: str = "Model provider"
    offline: bool = False  # True for the demo agent: the UI labels it
    wire_styles: tuple[str, ...] = PROFILE_WIRE_STYLES
    # The provider that answers on this one's wire when it cannot run here (no API key) and a
    # profile names it: the OpenAI provider's is the offline demo agent on OpenAI's wire. "": none.
    offline_stand_in: str = ""
    # Said beside a vendor's own search this provider only plays (the demo agent's simulated one).
    simulated_search_note: str = ""

    @classmethod
    def from_settings(cls) -> ModelProvider:
        return cls()

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why `from_settings` cannot make a working provider here (with the fix), or "" when it can.
        Forms show such a provider disabled, so a run never starts only to fail on it."""
        return ""

    def adapt_settings(self, agent_settings: AgentSettings) -> AgentSettings:
        """The run's engine settings for this provider (another vendor's request shape: OpenAI's
        provider sets `openai_wire`). Default: unchanged."""
        return agent_settings

    @abstractmethod
    def create(self, request_kwargs: dict[str, Any]) -> ProviderResponse:
        """Send one Messages API request and return the assistant's reply."""

    def create_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal) -> ProviderResponse:
        """`create`, stopped midway when `cancel` is set while the request is in flight: then it raises
        engine.execution.CallCancelled. The loop calls this one. This default cannot stop a call once
        sent (it returns when `create` does): right for providers that answer at once, like the demo
        agent; a network provider overrides it to abort the request."""
        return self.create(request_kwargs)

    def stream_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal, on_text: TextSink) -> ProviderResponse:
        """`create_or_cancel`, telling `on_text` each piece of assistant text as it is produced, in the
        calling thread; the response returned is the whole reply, as `create` would give it. The loop
        calls this one. This default streams nothing: the text arrives with the response."""
        return self.create_or_cancel(request_kwargs, cancel)

    def summarise(self, messages: list[dict[str, Any]], *, model: str = "") -> str:
        """A summary of `messages` for compaction. Default: a plain extract of the text blocks."""
        return plain_extract(messages)


def plain_extract(messages: list[dict[str, Any]], *, limit: int = 2000) -> str:
    """The text of each message, one line per block, newest kept when it is too long."""
    lines: list[str] = []
    for message in messages:
        for block in blocks_of(message):
            kind = block.get("type")
            if kind == "text" and block.get("text", "").strip():
                lines.append(f"{message.get('role')}: {block['text'].strip()}")
            elif kind == "tool_use":
                lines.append(f"{message.get('role')} called {block.get('name')}({json.dumps(block.get('input', {}))})")
            elif kind == "tool_result":
                text = " ".join(c.get("text", "") or c.get("tool_name", "") for c in result_content(block))
                lines.append(f"tool result: {text.strip()[:300]}")
    summary = "\n".join(lines)
    return summary if len(summary) <= limit else "…" + summary[-limit:]
