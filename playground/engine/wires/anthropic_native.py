"""Anthropic's native tool search: deferred tools with `defer_loading`, our ToolSearch answering with
`tool_reference` blocks the API expands inline (the cached prefix stays intact)."""
from __future__ import annotations

from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.wires.anthropic import AnthropicWire


class AnthropicNative(AnthropicWire):
    name = NATIVE_STYLE
    planned_as = NATIVE_STYLE
    profile_choice = True
    label = "Native (defer_loading + tool_reference)"
    short_label = "native (tool_reference)"
    compare_label = "native (defer_loading + tool_reference)"
