"""What the engine derives from a tool row's definition: the engine `Tool` it stands for, its token
estimate and whether it is deferred.

No model import here, not even for its type, so that `models.Tool.save` can keep its derived fields
true while the adapter, which reads and writes rows, imports the models: a row is read through the
attributes `ToolRow` names.
"""
from __future__ import annotations

from typing import Any, Protocol

from playground.engine.tokens import CharEstimateCounter, TokenCounter
from playground.engine.tools import Tool as EngineTool
from playground.engine.tools import ToolDefinitionError, is_deferred



class ToolRow(Protocol):
    """What this module reads and sets on a tool row (`models.Tool` is one)."""

    name: str
    description: str
    input_schema: Any
    search_hint: str
    server: Any  # the McpServer row, or None; read only when `server_id` is set
    server_id: int | None
    server_name: str
    should_defer: bool
    always_load: bool
    token_estimate: int
    deferred: bool
    content_hash: str

_token_counter: TokenCounter | None = None


def token_counter() -> TokenCounter:
    """The estimate used for registry numbers: deterministic and offline (chars ÷ 2.5)."""
    global _token_counter
    if _token_counter is None:
        _token_counter = CharEstimateCounter()
    return _token_counter


def tool_to_engine(row: ToolRow) -> EngineTool:
    """One row as an engine `Tool` (raises `ToolDefinitionError` for a definition the API rejects)."""
    return engine_tool(
        name=row.name,
        description=row.description,
        input_schema=row.input_schema,
        search_hint=row.search_hint,
        server=row.server.name if row.server_id else row.server_name,
        should_defer=row.should_defer,
        always_load=row.always_load,
    )


def engine_tool(*, name: str, description: str, input_schema: Any, search_hint: str, server: str | None,
                should_defer: bool, always_load: bool) -> EngineTool:
    is_mcp = name.startswith("mcp__")
    return EngineTool(
        name=name,
        description=description or "",
        input_schema=input_schema,
        search_hint=search_hint or "",
        is_mcp=is_mcp,
        server=(server or None) if is_mcp else None,
        should_defer=should_defer,
        always_load=always_load,
    )


def refresh_derived_fields(row: ToolRow) -> None:
    """Token estimate and deferral from the engine, for `Tool.save` and bulk writes.

    A row whose definition the engine rejects (only possible through the admin or raw SQL: the forms
    and the importer validate) keeps a rough estimate and is treated as not deferred.
    """
    try:
        tool = tool_to_engine(row)
    except ToolDefinitionError:
        row.token_estimate = token_counter().count_tools(
            [{"name": row.name, "description": row.description, "input_schema": row.input_schema}]
        )
        row.deferred = False
        row.content_hash = ""
        return
    row.token_estimate = token_counter().count_tools([tool.to_api()])
    row.deferred = is_deferred(tool)
    row.content_hash = tool.content_hash
