"""OpenAI's tool search answered by our backend (Responses API, `execution: "client"`): ToolSearch's
description and schema on a client `tool_search` tool; deferred tools are not sent, our backend's
answer is a `tool_search_output` carrying the loaded definitions. The announcement goes in the
instructions. Planned as native (a tool only a compaction carried goes as an ordinary function)."""
from __future__ import annotations

from typing import Any

from playground.engine.openai_wire import client_tool_search_tool, function_tool, responses_input
from playground.engine.tools import TOOL_SEARCH_NAME
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.wires.base import RESPONSES_API
from playground.engine.wires.openai import OpenAIWire, tool_of


class OpenAIClient(OpenAIWire):
    name = "openai-client"
    planned_as = NATIVE_STYLE
    stands_for = NATIVE_STYLE
    api = RESPONSES_API
    label = "OpenAI tool_search answered by our backend (Responses)"
    compare_label = "tool_search answered by our backend (Responses)"
    loads_from_tool_result = False  # a function is loaded only through a tool_search_output

    def build_request(self, turn: Any) -> dict[str, Any]:
        plan = turn.request
        body: dict[str, Any] = {"model": plan.model, "max_output_tokens": plan.max_tokens}
        if plan.system:
            body["instructions"] = plan.system
        tools: list[dict[str, Any]] = []
        for definition in plan.tools:
            if definition["name"] == TOOL_SEARCH_NAME:
                tools.append(client_tool_search_tool())
            elif not definition.get("defer_loading"):  # deferred ones arrive with their tool_search_output
                tools.append(function_tool(plan.permitted.get(definition["name"]) or tool_of(definition)))
        body["input"] = responses_input(plan.messages, definitions=plan.permitted.get,
                                        callable_names=set(plan.tool_names) - {TOOL_SEARCH_NAME})
        if tools:
            body["tools"] = tools
        return body
