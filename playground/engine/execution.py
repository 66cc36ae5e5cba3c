"""Tool execution contract: the loop hands a call to an executor and gets an outcome back.

Implementations live outside the engine (they do I/O): `playground.mcp_servers.executor` dispatches
MCP tools to their server, built-in tools in-process, and catalog-only tools to a simulated result.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from playground.engine.history import text_block
from playground.engine.tools import Tool


@dataclass
class ToolOutcome:
    """A tool's result, keeping MCP content types: text blocks, image blocks, structured content."""

    content: list[dict[str, Any]]  # Messages API tool_result content blocks (text / image)
    is_error: bool = False
    structured: dict[str, Any] | None = None
    duration_ms: float = 0.0
    simulated: bool = False  # a catalog-only tool answered without a backend

    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "is_error": self.is_error,
            "structured": self.structured,
            "duration_ms": round(self.duration_ms, 2),
            "simulated": self.simulated,
        }


def error_tool_result(tool_use_id: str, text: str) -> dict[str, Any]:
    """The tool_result block that answers a call with an error the model can read (a call that failed,
    was refused, or was never run: every tool_use needs its tool_result in the next message)."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True, "content": [text_block(text)]}


class ToolExecutor(ABC):
    @abstractmethod
    def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float = 30.0) -> ToolOutcome:
        """Run one call. Never raises for a tool-level failure: returns is_error=True instead."""
