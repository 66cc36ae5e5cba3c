"""A plain ToolSearch function over Chat Completions (any OpenAI-compatible endpoint): discovered
tools as ordinary functions, the announcement in the system message. Planned as the client style
(the result is ToolSearch's JSON text)."""
from __future__ import annotations

from typing import Any

from playground.engine.openai_wire import chat_function_tool, chat_messages
from playground.engine.toolsearch_tool import CLIENT_STYLE
from playground.engine.wires.base import CHAT_COMPLETIONS_API
from playground.engine.wires.openai import OpenAIWire, tool_of


class OpenAIFunctions(OpenAIWire):
    name = "openai-functions"
    planned_as = CLIENT_STYLE
    stands_for = CLIENT_STYLE
    api = CHAT_COMPLETIONS_API
    label = "OpenAI ToolSearch function (Chat Completions)"
    compare_label = "ToolSearch function (Chat Completions)"

    def build_request(self, turn: Any) -> dict[str, Any]:
        plan = turn.request
        body: dict[str, Any] = {"model": plan.model, "max_completion_tokens": plan.max_tokens,
                                "messages": chat_messages(plan.system, plan.messages)}
        if plan.tools:
            body["tools"] = [chat_function_tool(plan.permitted.get(t["name"]) or tool_of(t)) for t in plan.tools]
        return body
