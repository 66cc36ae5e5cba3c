"""OpenAI's hosted tool search (Responses API, OpenAI searches): `{"type": "tool_search"}` plus every
permitted deferred tool with `defer_loading: true`, MCP tools in one namespace per server
(`openai_wire.deferred_namespaces`). No announcement: the namespaces' names and descriptions tell the
model what it can search. Planned as native; stands for a profile's "server" style."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from playground.engine.openai_wire import TOOL_SEARCH_TYPE, deferred_namespaces, function_tool, hosted_search_items, responses_input
from playground.engine.search.base import ToolSearchResult
from playground.engine.tools import TOOL_SEARCH_NAME, Tool
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.wires.anthropic_server import AnthropicServerSearch
from playground.engine.wires.base import RESPONSES_API
from playground.engine.wires.openai import OpenAIWire, announcement_texts


class OpenAIHosted(OpenAIWire):
    name = "openai-hosted"
    planned_as = NATIVE_STYLE
    stands_for = AnthropicServerSearch.name
    api = RESPONSES_API
    label = "OpenAI hosted tool_search (Responses)"
    compare_label = "hosted tool_search (Responses)"
    loads_from_tool_result = False  # a function is loaded only through a tool_search_output
    searches_on_server = True
    search_call_prefix = "call_"
    sends_announcement = False

    def build_request(self, turn: Any) -> dict[str, Any]:
        plan = turn.request
        body: dict[str, Any] = {"model": plan.model, "max_output_tokens": plan.max_tokens}
        if turn.settings.system_prompt:
            body["instructions"] = turn.settings.system_prompt
        if not plan.decision.enabled:
            tools = [function_tool(t) for t in plan.permitted]
        else:
            loaded = [plan.permitted.get(n) for n in plan.loaded_tools if n != TOOL_SEARCH_NAME]
            tools = [function_tool(t) for t in loaded if t is not None]
            tools += [{"type": TOOL_SEARCH_TYPE}, *deferred_namespaces(plan.permitted.deferred, turn.settings.server_descriptions)]
        body["input"] = responses_input(plan.messages, definitions=plan.permitted.get,
                                        callable_names={t.name for t in plan.permitted}, namespaced=True,
                                        drop_texts=announcement_texts(turn))
        if tools:
            body["tools"] = tools
        return body

    def discovery_messages(self, call_id: str, arguments: Mapping[str, Any], result: ToolSearchResult, *,
                           definitions: Callable[[str], Tool | None], server_search: str = "") -> list[dict[str, Any]]:
        """OpenAI searched: its `tool_search_call` and `tool_search_output` items, as a history keeps them."""
        return hosted_search_items(call_id, result.matches, definitions)
