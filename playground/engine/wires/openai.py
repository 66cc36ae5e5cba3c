"""What OpenAI's wire styles share: automatic prompt caching, and the tools the model sees of a body.

Their request shapes (namespaces, `tool_search_output`, the history as Responses input or Chat
Completions messages) are `engine/openai_wire.py`, which the providers read too.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from playground.engine.announcements import DELTA_OPEN, FULL_OPEN
from playground.engine.history import blocks_of
from playground.engine.openai_wire import visible_tools
from playground.engine.tools import Tool
from playground.engine.wires.base import WireStyle
from playground.engine.wires.vendors import OPENAI


class OpenAIWire(WireStyle):
    vendor = OPENAI

    def caches_prompt(self, settings: Any) -> bool:
        """OpenAI caches every long prompt on its own, whatever the profile marks."""
        return True

    def wire_tokens(self, turn: Any) -> Any:
        """The tools the model sees of the body (`openai_wire.visible_tools`: a deferred namespace's
        name and description, the tools a `tool_search_output` loaded…), counted by the turn's
        counter, plus the announcement where the style sends one. The baseline is the plan's."""
        tokens = turn.request.tokens
        announced = tokens.announcement_tokens if self.sends_announcement else 0
        return replace(tokens, sent_tokens=turn.token_counter.count_tools(visible_tools(turn.wire_request())),
                       announcement_tokens=announced)


def announcement_texts(turn: Any) -> list[str]:
    """Every announcement text in the history as sent (delta ones are stored in user messages)."""
    texts = [b["text"] for m in turn.request.messages if m.get("role") == "user" and "type" not in m
             for b in blocks_of(m) if b.get("type") == "text" and isinstance(b.get("text"), str)
             and b["text"].lstrip().startswith((FULL_OPEN, DELTA_OPEN))]
    block = turn.request.announcement_block
    return texts + ([block["text"]] if block else [])


def tool_of(definition: dict[str, Any]) -> Tool:
    """An engine tool from a Messages API definition (a tool the plan sends but the catalog lacks)."""
    return Tool(name=definition["name"], description=definition.get("description", ""),
                input_schema=definition.get("input_schema") or {"type": "object", "properties": {}})
