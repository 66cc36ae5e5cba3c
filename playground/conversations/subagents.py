"""The built-in `Agent` tool: the model hands a self-contained task to a subagent.

The subagent's tools come from the engine's `resolve_subagent_tools` (the global agent denylist keeps
`Agent` itself out, so agents do not nest); it runs through the same loop, and its events nest
under the parent's `tool_call` event (`Event.parent_sequence`).
"""
from __future__ import annotations

from playground.engine.tools import Tool, ToolCatalog

AGENT_TOOL_NAME = "Agent"

AGENT_TOOL = Tool(
    name=AGENT_TOOL_NAME,
    description=(
        "Launch a subagent to carry out a self-contained task with its own tools (deferred tools and "
        "ToolSearch included). It works without seeing this conversation and returns its final answer. "
        "Give it a complete, specific prompt."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A short (3-5 word) description of the task."},
            "prompt": {"type": "string", "description": "The task for the subagent, with everything it needs to know."},
            "subagent_type": {
                "type": "string",
                "description": "Name of a subagent profile to run as (optional; default: a general subagent).",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
)


_with_agent: list[tuple[ToolCatalog, ToolCatalog]] = []  # (catalog, catalog + Agent), the last two


def with_agent_tool(catalog: ToolCatalog) -> ToolCatalog:
    """The catalog plus the Agent tool, unless the registry already has a tool by that name.

    The same object for the same catalog (the registry's cached one, run after run): what is kept
    per catalog (the permission filter, the search indexes by fingerprint) is found again, and a
    catalog of 100,000 tools is not copied per run."""
    if AGENT_TOOL_NAME in catalog:
        return catalog
    for base, extended in _with_agent:
        if base is catalog:
            return extended
    extended = ToolCatalog([*catalog.tools, AGENT_TOOL])
    _with_agent.insert(0, (catalog, extended))
    del _with_agent[2:]  # each pair holds two catalogs: the current one and, while it changes, the last
    return extended
