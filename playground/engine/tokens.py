"""Token counting behind one interface: chars ÷ 2.5, Claude Code's estimate, deterministic and offline.

Used for the `auto` mode threshold and for per-request accounting (tools sent versus sending every
permitted tool). Counts of tool lists are cached by content, since the same lists recur every turn.
"""
from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Any

from playground.engine.tools import Tool, ToolCatalog

CHARS_PER_TOKEN = 2.5  # Claude Code's estimate when it does not ask the count-tokens API
# An image block costs about width × height / 750 tokens after the API scales it to fit 1568 px on
# its long edge, so about 1,600 at most. Counting its base64 text instead would call a 1 MB
# screenshot 500,000 tokens and compact the conversation for nothing; we count the upper bound.
IMAGE_TOKENS = 1600


class TokenCounter(ABC):
    """Counts tokens of tool definitions (Messages API dicts) and of text."""

    name: str = "counter"
    # True when a count depends on the tools alone, never on the instance (no model, no account):
    # then a catalog's counts are kept with the catalog (`count_catalog`), per counter class.
    counts_depend_on_tools_only: bool = False

    @abstractmethod
    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        """Tokens the tool definitions add to a request (0 for an empty list)."""

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens of a piece of text."""

    @property
    def source(self) -> str:
        """What the counts come from (shown next to figures in the UI)."""
        return self.name

    def count_engine_tools(self, tools: Sequence[Tool], deferred_names: Collection[str] = ()) -> int:
        """`count_tools` of these tools' API dicts (`defer_loading` for `deferred_names`). Counters
        override it to avoid rebuilding and re-serialising thousands of dicts every turn."""
        return self.count_tools([t.to_api(defer_loading=t.name in deferred_names) for t in tools])

    def count_catalog(self, catalog: ToolCatalog, *, deferred: bool = False) -> int:
        """`count_engine_tools` of every tool of `catalog` (`deferred`: of its deferred tools), each
        sent in full. Every turn asks it of the same permitted catalog (the mode decision, the
        all-tools baseline): a counter whose counts depend on the tools alone works it out once per
        catalog, not once per turn over 100,000 tools."""
        tools = catalog.deferred if deferred else catalog.tools
        if not type(self).counts_depend_on_tools_only:
            return self.count_engine_tools(tools)
        return catalog.kept(("tokens", type(self), deferred), lambda: self.count_engine_tools(tools))


def _serialise(tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(tools), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class CharEstimateCounter(TokenCounter):
    """ceil(characters ÷ 2.5) of the JSON the tools are sent as. Deterministic and offline."""

    name = "estimate (characters ÷ 2.5)"
    counts_depend_on_tools_only = True

    def count_tools(self, api_tool_dicts: Sequence[dict[str, Any]]) -> int:
        if not api_tool_dicts:
            return 0
        return self.count_text(_serialise(api_tool_dicts))

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def count_engine_tools(self, tools: Sequence[Tool], deferred_names: Collection[str] = ()) -> int:
        # The JSON of a list is "[" + ",".join(items) + "]": the same count as count_tools, from
        # per-tool lengths.
        if not tools:
            return 0
        # Each tool's length from its parts (`Tool.api_json_length`: the schema's text is kept per
        # schema), not by serialising 100,000 tool dicts on every turn.
        total = len(tools) + 1
        for tool in tools:
            total += tool.api_json_length(defer_loading=tool.name in deferred_names)
        return math.ceil(total / CHARS_PER_TOKEN)


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
