"""The third mode: Anthropic's own server-side search tools instead of our ToolSearch.

For comparison with our ToolSearch (profile wire style "server"). The engine plans the turn as for
the native style; this module only changes the wire request the way the API documents for its
search tools: our ToolSearch is replaced by `tool_search_tool_bm25_20251119` (or the regex
variant) and *every* permitted deferred tool is sent with `defer_loading: true` (the server searches
them; undiscovered ones cost no context). The server's `server_tool_use` / `tool_search_tool_result`
blocks come back inside the assistant message and are stored and sent back unchanged.
"""
from __future__ import annotations

from typing import Any

from playground.engine.tools import TOOL_SEARCH_NAME
from playground.engine.toolsearch_tool import NATIVE_STYLE, WIRE_STYLES

SERVER_STYLE = "server"
PROFILE_WIRE_STYLES: tuple[str, ...] = (*WIRE_STYLES, SERVER_STYLE)  # what a profile may choose
SERVER_SEARCH_TOOLS: dict[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}


def server_search_tool(variant: str) -> dict[str, str]:
    try:
        return dict(SERVER_SEARCH_TOOLS[variant])
    except KeyError:
        raise ValueError(f"unknown server-side search tool {variant!r}: use bm25 or regex") from None


def engine_wire_style(wire_style: str, variant: str) -> tuple[str, str]:
    """(the wire style the engine plans with, the server-side variant or "") for a profile's wire
    style: `AgentSettings.wire_style` and `AgentSettings.server_search`. The "server" style plans as
    native with `variant` (the deployment's ANTHROPIC_SERVER_SEARCH_TOOL, passed in by the caller);
    an unknown style or a bad variant fails here (ValueError), with its name."""
    if wire_style not in PROFILE_WIRE_STYLES:
        raise ValueError(f"Unknown wire style {wire_style!r} (native, client or server).")
    if wire_style != SERVER_STYLE:
        return wire_style, ""
    server_search_tool(variant)
    return NATIVE_STYLE, variant


def server_search_request(request: dict[str, Any], plan: Any, variant: str) -> dict[str, Any]:
    """The planned request, rewritten for the server-side search tool (unchanged when search is off).
    Callers outside the engine ask `TurnPlan.wire_request()`, which calls this for the "server" style."""
    if not plan.decision.enabled:
        return request
    loaded = [t for t in request.get("tools", []) if t.get("name") != TOOL_SEARCH_NAME and not t.get("defer_loading")]
    loaded_names = {t["name"] for t in loaded}
    deferred = [tool.to_api(defer_loading=True) for tool in plan.searchable.deferred if tool.name not in loaded_names]
    return {**request, "tools": [*loaded, server_search_tool(variant), *deferred]}
