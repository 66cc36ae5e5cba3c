"""Tool execution contract: the loop hands a call to an executor and gets an outcome back.

Implementations live outside the engine (they do I/O): `playground.mcp_servers.executor` dispatches
MCP tools to their server, built-in tools in-process, and catalog-only tools to a simulated result.
"""
from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    # The MCP server's own result (content blocks of every type, structuredContent, isError) as
    # it arrived, for a caller that passes it on unchanged (the gateway); None for other tools.
    mcp_result: dict[str, Any] | None = None

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


logger = logging.getLogger(__name__)


class CancelSignal:
    """Set, from any thread, when the person cancels a run; work in flight says how to stop meanwhile.

    The run is waiting in a model call or a tool call when the cancel arrives, so it cannot look:
    whoever learns of the cancel (the process's lease keeper) calls `set()`, which runs
    the callbacks registered with `while_running` — abort the HTTP request, cancel the MCP request.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            self._call(callback)

    @contextmanager
    def while_running(self, interrupt: Callable[[], None]) -> Iterator[None]:
        """Call `interrupt` if the signal is set while the block runs (at once if it already is)."""
        with self._lock:
            already = self._event.is_set()
            if not already:
                self._callbacks.append(interrupt)
        if already:
            self._call(interrupt)
        try:
            yield
        finally:
            with self._lock:
                if interrupt in self._callbacks:
                    self._callbacks.remove(interrupt)

    @staticmethod
    def _call(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            logger.exception("interrupting work in flight failed")


class CallCancelled(Exception):
    """Raised when the cancel signal stopped a call in flight (a tool call, a model call), and only then."""


class ToolExecutor(ABC):
    @abstractmethod
    def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float = 30.0,
                cancel: CancelSignal | None = None) -> ToolOutcome:
        """Run one call. Never raises for a tool-level failure: returns is_error=True instead.

        With `cancel`, a call still running when it is set is stopped and CallCancelled raised.
        """
