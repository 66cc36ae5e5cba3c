"""Our OpenTelemetry trace context on the MCP requests we send, so a server's spans join our trace.

MCP lets `traceparent` ride in a request's `_meta` (both eras; the 2026-07-28 specification names
it). Our spans are built from saved events after the fact (playground/telemetry.py), with trace and
span ids drawn from a key (`telemetry.ids_for`), so a caller knows them before the request goes
out: it wraps its calls in `spans_under(trace_id, span_id)` and every tool call made through the
executor in that context (same thread) carries `traceparent: 00-<trace>-<span>-01` — only while
tracing is on (OTEL_TRACES_ENABLED). The gateway does so for its sessions' calls (server.py).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from playground import telemetry

_traceparent: ContextVar[str | None] = ContextVar("mcp_traceparent", default=None)


def traceparent(trace_id: int, span_id: int) -> str:
    """The W3C `traceparent` of a sampled span."""
    return f"00-{trace_id & (2**128 - 1):032x}-{span_id & (2**64 - 1):016x}-01"


@contextmanager
def spans_under(trace_id: int, span_id: int) -> Iterator[None]:
    token = _traceparent.set(traceparent(trace_id, span_id))
    try:
        yield
    finally:
        _traceparent.reset(token)


def request_meta() -> dict[str, Any] | None:
    """The `_meta` to send with a request now: our traceparent, or None (tracing off, no context)."""
    value = _traceparent.get()
    if value is None or not telemetry.enabled():
        return None
    return {"traceparent": value}
