"""The client-side style: ordinary tools only, our ToolSearch answering with JSON text and the found
tools joining the next request's `tools` (any model or gateway; the tools prefix changes)."""
from __future__ import annotations

from playground.engine.toolsearch_tool import CLIENT_STYLE
from playground.engine.wires.anthropic import AnthropicWire


class AnthropicClient(AnthropicWire):
    name = CLIENT_STYLE
    planned_as = CLIENT_STYLE
    profile_choice = True
    label = "Client-side (any model or gateway)"
    short_label = "client-side (text)"
    compare_label = "client-side list (ToolSearch returns JSON)"
