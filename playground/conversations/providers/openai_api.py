"""OpenAI models through the official `openai` SDK: the Responses API, or Chat Completions.

The profile's wire style picks OpenAI's counterpart (`wires.registry.counterpart`): native → `openai-client`
(tool_search answered by our backend), client → `openai-functions` (a plain ToolSearch function over
Chat Completions, any OpenAI-compatible endpoint), server → `openai-hosted` (OpenAI searches).
`adapt_settings` sets it on the turn's AgentSettings; the engine builds the body
(`TurnPlan.wire_request()`), and this provider sends it and answers in the loop's Messages API
shapes: a `function_call` becomes a `tool_use` (a namespaced one by its catalog name), a client
`tool_search_call` a ToolSearch `tool_use` (the loop answers it with tool_reference blocks, which
the engine sends back as a `tool_search_output`), text a text block; any other item (OpenAI's own
search, reasoning) is kept as a `responses_item` block and sent back unchanged.
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from playground.conversations.providers.base import (
    ModelProvider,
    NeutralMessage,
    ProviderError,
    ProviderResponse,
    chat_completions_request,
    parsed_reply,
    plain_extract,
    process_client,
    sdk_errors,
)
from playground.engine.execution import CancelSignal
from playground.engine.history import RESPONSES_ITEM
from playground.engine.openai_wire import TOOL_SEARCH_CALL, called_tool_name
from playground.engine.wires.base import CHAT_COMPLETIONS_API, MESSAGES_API, RESPONSES_API
from playground.engine.wires.registry import settings_for_vendor
from playground.engine.wires.vendors import OPENAI
from playground.engine.requests import AgentSettings
from playground.engine.tools import TOOL_SEARCH_NAME
from playground.mcp_servers.connection import background_loop

SUMMARY_PROMPT = (
    "Summarise the conversation so far for your own later reference: the person's requests, what the "
    "tools returned and what is still open. Plain text, at most 200 words."
)


def responses_content(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses output items as the loop's content blocks."""
    content: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            content += [{"type": "text", "text": part.get("text", "")} for part in item.get("content", [])
                        if part.get("type") == "output_text" and part.get("text")]
        elif kind == "function_call":
            content.append({"type": "tool_use", "id": item.get("call_id", ""), "name": called_tool_name(item),
                            "input": _arguments(item.get("arguments"))})
        elif kind == TOOL_SEARCH_CALL and item.get("execution") == "client":
            content.append({"type": "tool_use", "id": item.get("call_id", ""), "name": TOOL_SEARCH_NAME,
                            "input": item.get("arguments") if isinstance(item.get("arguments"), dict) else {}})
        else:
            content.append({"type": RESPONSES_ITEM, "item": item})
    return content


def chat_content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""),
                        "input": _arguments(function.get("arguments"))})
    return content


def _arguments(text: Any) -> dict[str, Any]:
    """A call's JSON arguments; anything else becomes {} (the tool's own validation then says what is missing)."""
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def reported_usage(prompt_tokens: Any, output_tokens: Any, cached_tokens: Any) -> dict[str, int]:
    """OpenAI's usage in the loop's one accounting (Anthropic's: `input` is the uncached part, the
    cached part beside it). OpenAI's prompt / input tokens include the cached ones, so they are
    taken out of `input`; OpenAI bills no cache write."""
    prompt, cached = _count(prompt_tokens), _count(cached_tokens)
    cached = min(cached, prompt)
    return {"input": prompt - cached, "output": _count(output_tokens), "cache_read": cached, "cache_write": 0}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _stop_reason(content: list[dict[str, Any]], cut_off: bool) -> str:
    if cut_off:
        return "max_tokens"
    return "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"


class OpenAIProvider(ModelProvider):
    key = "openai"
    label = "OpenAI (Responses API; Chat Completions for the functions style)"
    vendor = "openai"
    apis = (RESPONSES_API, CHAT_COMPLETIONS_API)
    otel_name = "openai"
    offline_stand_in = "demo-openai"  # a profile naming OpenAI runs with the demo agent on OpenAI's wire without a key

    def __init__(self, *, api_key: str, base_url: str = "", model: str = "", max_retries: int = 2, timeout: float = 60.0) -> None:
        if not api_key:
            raise ProviderError("OPENAI_API_KEY is not set", kind="configuration")
        options = {"api_key": api_key, "base_url": base_url or None, "max_retries": max_retries, "timeout": timeout}
        self.model = model
        # The SDK is imported here, not with this module: pages read the class's facts (label, vendor,
        # whether it can run) in the web process, which never calls the API and need not load the
        # SDK's thousands of types (seconds at start-up or on a first request).
        import openai

        self.sdk = openai
        key = tuple(sorted(options.items()))
        self.client = process_client(("openai", *key), lambda: openai.OpenAI(**options))
        # Used only on the background loop (cancellable).
        self.async_client = process_client(("openai-async", *key), lambda: openai.AsyncOpenAI(**options))

    @classmethod
    def unavailable_reason(cls) -> str:
        return "" if settings.OPENAI_API_KEY else "no API key: set OPENAI_API_KEY"

    @classmethod
    def default_model(cls) -> str:
        return settings.OPENAI_MODEL

    @classmethod
    def from_settings(cls) -> OpenAIProvider:
        return cls(api_key=settings.OPENAI_API_KEY, base_url=settings.OPENAI_BASE_URL, model=cls.default_model(),
                   max_retries=settings.OPENAI_MAX_RETRIES, timeout=settings.OPENAI_TIMEOUT_SECONDS)

    def adapt_settings(self, agent_settings: AgentSettings) -> AgentSettings:
        """The profile's style as OpenAI's matching one, with this provider's model (a Claude
        model name in the profile means "the default model" here)."""
        return settings_for_vendor(agent_settings, OPENAI, self.model)

    def create(self, request_kwargs: dict[str, Any], *, api: str = MESSAGES_API) -> ProviderResponse:
        return self.create_or_cancel(request_kwargs, None, api=api)

    def create_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal | None, *,
                         api: str = MESSAGES_API) -> ProviderResponse:
        self.check_api(api)
        chat = api == CHAT_COMPLETIONS_API
        call = (self.async_client.chat.completions.create if chat else self.async_client.responses.create)(**request_kwargs)
        with sdk_errors(self.sdk):
            reply = background_loop().run(call, cancel=cancel)
        data = parsed_reply(reply).model_dump(mode="json", exclude_none=True)
        if chat:
            choice = (data.get("choices") or [{}])[0]
            content = chat_content(choice.get("message") or {})
            usage = data.get("usage") or {}
            return ProviderResponse(
                content=content, stop_reason=_stop_reason(content, choice.get("finish_reason") == "length"),
                usage=reported_usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                     (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)),
                model=data.get("model", ""), response_id=data.get("id", ""))
        content = responses_content(data.get("output") or [])
        usage = data.get("usage") or {}
        cut_off = data.get("status") == "incomplete"
        return ProviderResponse(
            content=content, stop_reason=_stop_reason(content, cut_off),
            usage=reported_usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0),
                                 (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)),
            model=data.get("model", ""), response_id=data.get("id", ""))

    def summarise(self, messages: list[dict[str, Any]], *, model: str = "") -> str:
        transcript = plain_extract(messages, limit=20_000)
        try:
            reply = self.client.chat.completions.create(
                model=model or self.model, max_completion_tokens=600,
                messages=[{"role": "user", "content": f"{SUMMARY_PROMPT}\n\n<conversation>\n{transcript}\n</conversation>"}])
        except self.sdk.APIError:
            return plain_extract(messages)  # compaction must not fail the conversation
        return (reply.choices[0].message.content or "").strip() or plain_extract(messages)

    def complete(self, system: str, messages: list[NeutralMessage], max_tokens: int, *, model: str = "") -> ProviderResponse:
        return self.create(chat_completions_request(system, messages, max_tokens, model or self.model), api=CHAT_COMPLETIONS_API)
