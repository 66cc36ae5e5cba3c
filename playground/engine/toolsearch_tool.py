"""The ToolSearch tool itself: its definition, running a call, and the content it answers with.

Planning shapes (a wire style's `planned_as`, see `requests.py` and `wires/`):
- native: the tool_result content holds `tool_reference` blocks and only those (the API rejects
  text mixed into it); the API expands each reference into the tool's schema. Claude Code adds a
  separate text block "Tool loaded." beside the tool_result in the same user message, because
  models otherwise sometimes stop right after the expanded schemas.
- client: the tool_result is one text block holding the JSON output; the discovered tools join the
  next request as ordinary tools. Works with any model or gateway.
A search that finds nothing answers with text in both styles, naming MCP servers still connecting.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from playground.engine.execution import error_tool_result
from playground.engine.history import text_block
from playground.engine.search.base import SearchBackend, ToolSearchResult
from playground.engine.search.usage import UsageLog
from playground.engine.tools import TOOL_SEARCH_NAME, Tool, ToolCatalog

# The two shapes the engine plans a turn in (`WireStyle.planned_as`); Anthropic's two wire styles of
# the same names send them as planned (engine/wires/anthropic_native.py, anthropic_client.py).
NATIVE_STYLE = "native"  # deferred tools with defer_loading, ToolSearch answers with tool_reference blocks
CLIENT_STYLE = "client"  # ordinary tools only, ToolSearch answers as text: any model or gateway
PLANNING_STYLES: tuple[str, ...] = (NATIVE_STYLE, CLIENT_STYLE)
DEFAULT_MAX_RESULTS = 5
TOOL_LOADED_TEXT = "Tool loaded."

TOOL_SEARCH_DESCRIPTION = """\
Fetches the full definitions of deferred tools so they can be called. Deferred tools are listed by \
name only (in <available-deferred-tools>); until fetched, a deferred tool has no schema and cannot be \
called. Once fetched, a tool is callable like any other tool.

Query forms:
- "select:Read,Edit" — fetch these exact tools by name (comma-separated).
- "slack send message" — keyword search over tool names, search hints and descriptions; returns up to \
max_results best matches.
- "+slack send" — require "slack" (in the name or as a whole word in the description), rank by the rest.
- "mcp__github" — every deferred tool whose name starts with this prefix."""

TOOL_SEARCH_TOOL = Tool(
    name=TOOL_SEARCH_NAME,
    description=TOOL_SEARCH_DESCRIPTION,
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Query: "select:<name>[,<name>...]" for exact tools, or keywords (prefix "+" to require a term).',
            },
            "max_results": {
                "type": "integer",
                "description": "Maximum number of tools to return (default 5).",
                "default": DEFAULT_MAX_RESULTS,
                "minimum": 1,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


class ToolSearchInputError(ValueError):
    """The model called ToolSearch with input that does not fit its schema; becomes an error tool_result."""


def read_arguments(arguments: object, default_max_results: int = DEFAULT_MAX_RESULTS) -> tuple[str, int]:
    """Validate ToolSearch input: `query` a string, `max_results` a positive integer (5.0 accepted)."""
    if not isinstance(arguments, Mapping):
        raise ToolSearchInputError(f"ToolSearch input must be an object, got {type(arguments).__name__}")
    if "query" not in arguments:
        raise ToolSearchInputError("ToolSearch input is missing the required field 'query'")
    query = arguments["query"]
    if not isinstance(query, str):
        raise ToolSearchInputError(f"ToolSearch 'query' must be a string, got {type(query).__name__}")
    max_results = arguments.get("max_results", default_max_results)
    if max_results is None:
        max_results = default_max_results
    if isinstance(max_results, bool) or not isinstance(max_results, (int, float)):
        raise ToolSearchInputError(f"ToolSearch 'max_results' must be an integer, got {max_results!r}")
    if isinstance(max_results, float):
        if not max_results.is_integer():
            raise ToolSearchInputError(f"ToolSearch 'max_results' must be an integer, got {max_results!r}")
        max_results = int(max_results)
    if max_results < 1:
        raise ToolSearchInputError(f"ToolSearch 'max_results' must be at least 1, got {max_results}")
    return query, max_results


def run_tool_search(
    arguments: dict[str, Any],
    catalog: ToolCatalog,
    backend: SearchBackend,
    *,
    pending_mcp_servers: Sequence[str] = (),
    default_max_results: int = DEFAULT_MAX_RESULTS,
    usage: UsageLog | None = None,
) -> ToolSearchResult:
    """Run one ToolSearch call over `catalog` (pass `RequestPlan.searchable`: permitted tools only).
    `usage`: past searches that led to tools (search/usage.py), for backends that learn from it."""
    query, max_results = read_arguments(arguments, default_max_results)
    return backend.search(query, catalog, max_results=max_results, pending_mcp_servers=pending_mcp_servers, usage=usage)


def no_match_text(result: ToolSearchResult) -> str:
    text = f"No matching deferred tools found for query {result.query!r} ({result.total_deferred_tools} deferred tools searched)."
    if result.pending_mcp_servers:
        servers = ", ".join(result.pending_mcp_servers)
        text += f" These MCP servers are still connecting and their tools are not searchable yet: {servers}. Try again shortly."
    return text


def tool_search_result_content(result: ToolSearchResult, planned_as: str) -> list[dict[str, Any]]:
    """The tool_result content for a ToolSearch call."""
    _check_planned_as(planned_as)
    if not result.matches:
        return [text_block(no_match_text(result))]
    if planned_as == NATIVE_STYLE:
        return [{"type": "tool_reference", "tool_name": name} for name in result.matches]
    return [text_block(json.dumps(result.to_output(), ensure_ascii=False))]


def tool_loaded_block(result: ToolSearchResult, planned_as: str) -> dict[str, Any] | None:
    """Claude Code's sibling text block, placed after the tool_result in the same user message
    (native style with references only; never inside the tool_result)."""
    _check_planned_as(planned_as)
    if planned_as == NATIVE_STYLE and result.matches:
        return text_block(TOOL_LOADED_TEXT)
    return None


def tool_search_user_blocks(tool_use_id: str, result: ToolSearchResult, planned_as: str) -> list[dict[str, Any]]:
    """The user-message blocks answering one ToolSearch call: the tool_result, then the sibling text if any."""
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": tool_search_result_content(result, planned_as)}
    ]
    sibling = tool_loaded_block(result, planned_as)
    if sibling is not None:
        blocks.append(sibling)
    return blocks


def tool_search_error_result(tool_use_id: str, error: Exception) -> dict[str, Any]:
    return error_tool_result(tool_use_id, str(error))


def deferred_tool_not_loaded_message(tool_name: str) -> str:
    return (
        f"Tool {tool_name!r} is deferred and its definition has not been loaded yet. "
        f'Call {TOOL_SEARCH_NAME} with query "select:{tool_name}" first, then call {tool_name} again.'
    )


def deferred_tool_not_loaded_result(tool_use_id: str, tool_name: str) -> dict[str, Any]:
    """The tool_result error for a model that called a deferred tool before loading it."""
    return error_tool_result(tool_use_id, deferred_tool_not_loaded_message(tool_name))


def _check_planned_as(planned_as: str) -> None:
    if planned_as not in PLANNING_STYLES:
        raise ValueError(f"unknown planning style {planned_as!r} (expected one of {', '.join(PLANNING_STYLES)})")
