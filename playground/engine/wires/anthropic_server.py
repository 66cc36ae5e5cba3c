"""Anthropic's own server-side search tools instead of our ToolSearch (the profile style "server").

For comparison with our ToolSearch. The engine plans the turn as for the native style; this style
changes the wire request the way the API documents for its search tools: our ToolSearch is replaced
by `tool_search_tool_bm25_20251119` (or the regex variant, `AgentSettings.server_search`) and *every*
permitted deferred tool is sent with `defer_loading: true` (the server searches them; undiscovered
ones cost no context). The server's `server_tool_use` / `tool_search_tool_result` blocks come back
inside the assistant message and are stored and sent back unchanged.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from playground.engine.search.base import ToolSearchResult
from playground.engine.tools import TOOL_SEARCH_NAME, Tool
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.wires.anthropic import AnthropicWire

SERVER_SEARCH_TOOLS: dict[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
DEFAULT_SERVER_SEARCH = "bm25"  # what `toolsearch request|cost` run unless told


def server_search_tool(variant: str) -> dict[str, str]:
    try:
        return dict(SERVER_SEARCH_TOOLS[variant])
    except KeyError:
        raise ValueError(f"unknown server-side search tool {variant!r}: use bm25 or regex") from None


def server_search_request(request: dict[str, Any], plan: Any, variant: str) -> dict[str, Any]:
    """The planned request, rewritten for the server-side search tool (unchanged when search is off)."""
    if not plan.decision.enabled:
        return request
    loaded = [t for t in request.get("tools", []) if t.get("name") != TOOL_SEARCH_NAME and not t.get("defer_loading")]
    loaded_names = {t["name"] for t in loaded}
    deferred = [tool.to_api(defer_loading=True) for tool in plan.searchable.deferred if tool.name not in loaded_names]
    return {**request, "tools": [*loaded, server_search_tool(variant), *deferred]}


class AnthropicServerSearch(AnthropicWire):
    name = "server"
    planned_as = NATIVE_STYLE
    profile_choice = True
    label = "Anthropic server-side search tool"
    short_label = "server-side search (Anthropic)"
    compare_label = "Anthropic's server-side search tool"
    searches_on_server = True
    search_call_prefix = "srvtoolu_"
    server_search_variants = tuple(SERVER_SEARCH_TOOLS)

    def default_settings(self) -> dict[str, Any]:
        return {"wire": self.name, "server_search": DEFAULT_SERVER_SEARCH}

    def check_settings(self, server_search: str) -> None:
        if not server_search:
            raise ValueError("the server wire style needs a server-side search tool: bm25 or regex")
        server_search_tool(server_search)  # a bad variant fails here, with its name

    def messages_body(self, turn: Any) -> dict[str, Any]:
        return server_search_request(turn.request.to_api_kwargs(), turn.request, turn.settings.server_search)

    def discovery_messages(self, call_id: str, arguments: Mapping[str, Any], result: ToolSearchResult, *,
                           definitions: Callable[[str], Tool | None], server_search: str = "") -> list[dict[str, Any]]:
        """The server's search inside an assistant message: its `server_tool_use` (`call_id`, a
        `srvtoolu_` id) and the `tool_search_tool_result` with the references it loaded."""
        variant = server_search or DEFAULT_SERVER_SEARCH
        query = str(arguments.get("query", ""))
        return [{"role": "assistant", "content": [
            {"type": "server_tool_use", "id": call_id, "name": server_search_tool(variant)["name"],
             "input": {"pattern": query} if variant == "regex" else {"query": query}},
            {"type": "tool_search_tool_result", "tool_use_id": call_id, "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": n} for n in result.matches]}},
        ]}]
