"""Token counting behind one interface: the count-tokens endpoint when reachable, else chars ÷ 2.5.

Used for the `auto` mode threshold and for per-request accounting (tools sent versus sending every
permitted tool). Counts of tool lists are cached by content, since the same lists recur every turn.
"""
from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

from playground.engine.tools import Tool

CHARS_PER_TOKEN = 2.5  # Claude Code's estimate when the count-tokens API is not available
# An image block costs about width × height / 750 tokens after the API scales it to fit 1568 px on
# its long edge, so about 1,600 at most. Counting its base64 text instead would call a 1 MB
# screenshot 500,000 tokens and compact the conversation for nothing; we count the upper bound.
IMAGE_TOKENS = 1600


class TokenCounter(ABC):
    """Counts tokens of tool definitions (Messages API dicts) and of text."""

    name: str = "counter"

    @abstractmethod
    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        """Tokens the tool definitions add to a request (0 for an empty list)."""

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens of a piece of text."""

    @property
    def source(self) -> str:
        """What the last count came from (shown next to figures in the UI)."""
        return self.name

    def count_engine_tools(self, tools: Sequence[Tool], deferred_names: Collection[str] = ()) -> int:
        """`count_tools` of these tools' API dicts (`defer_loading` for `deferred_names`). Counters
        override it to avoid rebuilding and re-serialising thousands of dicts every turn."""
        return self.count_tools([t.to_api(defer_loading=t.name in deferred_names) for t in tools])


def _serialise(tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(tools), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class CharEstimateCounter(TokenCounter):
    """ceil(characters ÷ 2.5) of the JSON the tools are sent as. Deterministic and offline."""

    name = "estimate (characters ÷ 2.5)"

    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        if not api_tool_dicts:
            return 0
        return self.count_text(_serialise(api_tool_dicts))

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def __init__(self, cache_size: int = 200_000) -> None:
        self._cache_size = cache_size  # kept for callers that pass it; the lengths need no cache now

    def count_engine_tools(self, tools: Sequence[Tool], deferred_names: Collection[str] = ()) -> int:
        # The JSON of a list is "[" + ",".join(items) + "]": the same count as count_tools, from
        # per-tool lengths cached by content hash.
        if not tools:
            return 0
        # Each tool's length from its parts (`Tool.api_json_length`: the schema's text is kept per
        # schema), not by serialising 100,000 tool dicts on every turn.
        total = len(tools) + 1
        for tool in tools:
            total += tool.api_json_length(defer_loading=tool.name in deferred_names)
        return math.ceil(total / CHARS_PER_TOKEN)


class AnthropicTokenCounter(TokenCounter):
    """`client.messages.count_tokens` (anthropic SDK), falling back to an estimate when it fails.

    Tool tokens = count(with tools) − count(same message without tools). Results are cached per
    distinct tool list (and text), since the same lists recur every turn; a failure switches to the fallback for that call and is remembered in
    `last_error` (the UI says which source a figure came from).
    """

    name = "count_tokens API"
    _probe_messages = [{"role": "user", "content": "."}]

    def __init__(self, client: Any, model: str, fallback: TokenCounter | None = None, cache_size: int = 256):
        self.client = client
        self.model = model
        self.fallback = fallback or CharEstimateCounter()
        self.last_error: str | None = None
        self._last_source = self.name
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size
        self._base: int | None = None

    @property
    def source(self) -> str:
        return self._last_source

    def _count(self, **kwargs: Any) -> int:
        response = self.client.messages.count_tokens(model=self.model, **kwargs)
        return int(response.input_tokens)

    def count_engine_tools(self, tools: Sequence[Tool], deferred_names: Collection[str] = ()) -> int:
        if not tools:
            return 0
        digest = hashlib.sha1()
        for tool in tools:  # keyed by content hashes: no need to serialise 10,000 schemas to find a cached count
            digest.update(f"{tool.content_hash}:{int(tool.name in deferred_names)};".encode())
        key = "tools:" + digest.hexdigest()
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        value = self.count_tools([t.to_api(defer_loading=t.name in deferred_names) for t in tools])
        if self._last_source == self.name:
            self._remember(key, value)
        return value

    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        if not api_tool_dicts:
            return 0
        key = hashlib.sha1(_serialise(api_tool_dicts).encode()).hexdigest()
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            if self._base is None:
                self._base = self._count(messages=self._probe_messages)
            # The API rejects defer_loading in count_tokens on some gateways; counting the plain schema is what matters.
            tools = [{k: v for k, v in t.items() if k != "defer_loading"} for t in api_tool_dicts]
            value = max(0, self._count(messages=self._probe_messages, tools=tools) - self._base)
            self._last_source = self.name
            self.last_error = None
        except Exception as exc:  # noqa: BLE001 - any SDK / network failure: fall back, say so
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._last_source = f"{self.fallback.name} (count_tokens failed)"
            return self.fallback.count_tools(api_tool_dicts)
        self._remember(key, value)
        return value

    def count_text(self, text: str) -> int:
        key = "text:" + hashlib.sha1(text.encode()).hexdigest()
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            value = self._count(messages=[{"role": "user", "content": text or "."}])
            self._last_source = self.name
            self.last_error = None
        except Exception as exc:  # noqa: BLE001 - as above: fall back and say so
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._last_source = f"{self.fallback.name} (count_tokens failed)"
            return self.fallback.count_text(text)
        self._remember(key, value)
        return value

    def _remember(self, key: str, value: int) -> None:
        self._cache[key] = value
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def without_image_data(value: Any) -> tuple[Any, int]:
    """A copy of Messages API content with every image block's base64 data emptied, and how many
    image blocks there were (for counting: see IMAGE_TOKENS)."""
    if isinstance(value, list):
        pairs = [without_image_data(item) for item in value]
        return [item for item, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        if value.get("type") == "image" and isinstance(value.get("source"), dict):
            return {**value, "source": {**value["source"], "data": ""}}, 1
        pairs = {key: without_image_data(item) for key, item in value.items()}
        return {key: item for key, (item, _) in pairs.items()}, sum(n for _, n in pairs.values())
    return value, 0


def count_messages(counter: TokenCounter, messages: Any) -> int:
    """Tokens of a request's messages (or any Messages API content): the text by `counter`, each
    image as IMAGE_TOKENS."""
    stripped, images = without_image_data(messages)
    return counter.count_text(json.dumps(stripped, ensure_ascii=False, default=str)) + IMAGE_TOKENS * images
