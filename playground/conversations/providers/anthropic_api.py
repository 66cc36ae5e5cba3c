"""Claude through the official `anthropic` SDK.

Requests go through the SDK's async client on the process's background event loop, so a cancel
stops one in flight: its task is cancelled and the HTTP connection closed (`create_or_cancel`).
The loop's requests stream (`stream_or_cancel`, the SDK's `messages.stream`): each text delta is
handed from the event loop to the calling thread through a queue and given to the loop's sink there,
so the sink's database writes never run on the shared event loop.
The SDK retries 408/409/429/5xx (529 overloaded included) and connection errors with backoff
(`max_retries`), bounded by `timeout` per attempt; whatever is left becomes a ProviderError the
loop shows as an error event. Responses are dumped to plain dicts without None fields so that
server-side search blocks (`server_tool_use`, `tool_search_tool_result`) go back unchanged.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import queue
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from django.conf import settings

from playground.conversations.providers.base import (
    ModelProvider,
    NeutralMessage,
    ProviderError,
    ProviderResponse,
    TextSink,
    messages_api_request,
    parsed_reply,
    plain_extract,
    process_client,
    sdk_errors,
)
from playground.engine.execution import CallCancelled, CancelSignal
from playground.engine.wires.base import MESSAGES_API
from playground.mcp_servers.connection import background_loop
from playground.per_process import in_loop_run, portal

_STREAM_END = object()

SUMMARY_PROMPT = (
    "Summarise the conversation so far for your own later reference: the person's requests, what the "
    "tools returned and what is still open. Plain text, at most 200 words."
)


def usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {
        "input": int(getattr(usage, "input_tokens", 0) or 0),
        "output": int(getattr(usage, "output_tokens", 0) or 0),
        "cache_read": int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        "cache_write": int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
    }


class AnthropicProvider(ModelProvider):
    key = "anthropic"
    label = "Claude (Anthropic API)"
    vendor = "anthropic"
    otel_name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str = "", max_retries: int = 2, timeout: float = 60.0) -> None:
        if not api_key:
            raise ProviderError("ANTHROPIC_API_KEY is not set", kind="configuration")
        options = {"api_key": api_key, "base_url": base_url or None, "max_retries": max_retries, "timeout": timeout}
        # The SDK is imported here, not with this module: pages read the class's facts (label, vendor,
        # whether it can run) in the web process, which never calls the API and need not load the
        # SDK's thousands of types (seconds at start-up or on a first request).
        import anthropic

        self.sdk = anthropic
        key = tuple(sorted(options.items()))
        self.client = process_client(("anthropic", *key), lambda: anthropic.Anthropic(**options))
        # Used only on the background loop: a task there can be cancelled, a blocking read cannot.
        self.async_client = process_client(("anthropic-async", *key), lambda: anthropic.AsyncAnthropic(**options))

    @classmethod
    def unavailable_reason(cls) -> str:
        return "" if settings.ANTHROPIC_API_KEY else "no API key: set ANTHROPIC_API_KEY"

    @classmethod
    def default_model(cls) -> str:
        return settings.DEFAULT_MODEL

    @classmethod
    def from_settings(cls) -> AnthropicProvider:
        return cls(
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL,
            max_retries=settings.ANTHROPIC_MAX_RETRIES,
            timeout=settings.ANTHROPIC_TIMEOUT_SECONDS,
        )

    def create(self, request_kwargs: dict[str, Any], *, api: str = MESSAGES_API) -> ProviderResponse:
        return self.create_or_cancel(request_kwargs, None, api=api)

    def _messages(self, request_kwargs: dict[str, Any]) -> Any:
        """The SDK's messages resource for a body: the beta one when the wire style names betas
        (`betas`, e.g. the tool-changes style's mid-conversation-tool-changes header)."""
        return self.async_client.beta.messages if request_kwargs.get("betas") else self.async_client.messages

    def create_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal | None, *,
                         api: str = MESSAGES_API) -> ProviderResponse:
        self.check_api(api)
        with sdk_errors(self.sdk):
            message = background_loop().run(self._messages(request_kwargs).create(**request_kwargs), cancel=cancel)
        return _response(message)

    async def _stream(self, request_kwargs: dict[str, Any], put: Callable[[str], None]) -> Any:
        """Stream one reply on the loop: each text piece to `put`, then the final message."""
        async with self._messages(request_kwargs).stream(**request_kwargs) as events:
            if not events.response.headers.get("content-type", "").startswith("text/event-stream"):
                parsed_reply((await events.response.aread())[:2000])  # a proxy's page, not a stream: says so
            async for event in events:
                if event.type == "text" and event.text:
                    put(event.text)
            return await events.get_final_message()

    def stream_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal | None, on_text: TextSink, *,
                         api: str = MESSAGES_API) -> ProviderResponse:
        self.check_api(api)
        if in_loop_run():
            return self._stream_in_loop_run(request_kwargs, cancel, on_text)
        pieces: queue.SimpleQueue = queue.SimpleQueue()
        future = portal().submit(self._stream(request_kwargs, pieces.put))
        future.add_done_callback(lambda _: pieces.put(_STREAM_END))
        with sdk_errors(self.sdk), (cancel.while_running(future.cancel) if cancel is not None else nullcontext()):
            # Wakes for each piece and once at the end; a cancel cancels the future, which ends it too.
            while (piece := pieces.get()) is not _STREAM_END:
                on_text(piece)
            try:
                message = future.result()
            except concurrent.futures.CancelledError:
                raise CallCancelled() from None
        return _response(message)

    def _stream_in_loop_run(self, request_kwargs: dict[str, Any], cancel: CancelSignal | None,
                            on_text: TextSink) -> ProviderResponse:
        """The same stream for a run on the process's loop (per_process.py): the run waits for each
        piece by yielding to the loop, and tells the sink in its own code, between waits."""
        pieces: asyncio.Queue = asyncio.Queue()

        async def stream() -> Any:
            try:
                return await self._stream(request_kwargs, pieces.put_nowait)
            finally:
                pieces.put_nowait(_STREAM_END)

        async def next_piece() -> Any:
            return await pieces.get()

        loop = portal()
        task = loop.wait(_started(stream()))
        try:
            with sdk_errors(self.sdk):
                while (piece := loop.wait(next_piece(), cancel=cancel)) is not _STREAM_END:
                    on_text(piece)
                message = loop.wait(_result_of(task), cancel=cancel)
        finally:
            task.cancel()  # a cancel (or a failing sink) stops the stream; this is the loop's own thread
        return _response(message)

    def summarise(self, messages: list[dict[str, Any]], *, model: str = "") -> str:
        transcript = plain_extract(messages, limit=20_000)
        try:
            message = self.client.messages.create(
                model=model or self.default_model(),
                max_tokens=600,
                messages=[{"role": "user", "content": f"{SUMMARY_PROMPT}\n\n<conversation>\n{transcript}\n</conversation>"}],
            )
        except self.sdk.APIError:
            # Compaction must not fail the conversation: fall back to the plain extract.
            return plain_extract(messages)
        return "".join(getattr(b, "text", "") for b in message.content).strip() or plain_extract(messages)

    def complete(self, system: str, messages: list[NeutralMessage], max_tokens: int, *, model: str = "") -> ProviderResponse:
        return self.create(messages_api_request(system, messages, max_tokens, model or self.default_model()), api=MESSAGES_API)


async def _started(coroutine: Any) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(coroutine)


async def _result_of(task: asyncio.Task) -> Any:
    return await asyncio.shield(task)  # a cancel of this wait is the caller's to pass on


def _response(message: Any) -> ProviderResponse:
    message = parsed_reply(message)
    return ProviderResponse(
        content=[block.model_dump(mode="json", exclude_none=True) for block in message.content],
        stop_reason=message.stop_reason or "",
        usage=usage_dict(message.usage),
        model=message.model,
        response_id=message.id,
    )
