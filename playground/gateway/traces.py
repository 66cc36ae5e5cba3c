"""A gateway session as an OpenTelemetry trace (docs/traces.md), span by span as its events are saved.

A session can last hours and be served by several web processes (manager.py), so its spans cannot
wait for its end: each ToolSearch and tool call is exported once its event is committed, under the
session's span, whose trace and span ids are drawn from the session (`telemetry.ids_for`) so every
process puts them in the same trace. The session span itself is exported when the client ends the
session; a session that is only abandoned leaves its calls under a parent the backend never receives
(Jaeger and Tempo show them with "missing parent"). Spans follow the MCP server conventions
(`tools/call <tool>`, SERVER kind) with the GenAI tool attributes.

Nothing secret goes in: no arguments, no results, no summaries; the session is named by its row,
not by its Mcp-Session-Id; the ToolSearch query only with OTEL_TRACES_CAPTURE_QUERIES.
"""
from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from opentelemetry.trace import SpanKind

from playground import telemetry
from playground.gateway.models import GatewayEvent, GatewaySession

logger = logging.getLogger(__name__)

TRACED_TYPES = (GatewayEvent.Type.TOOL_SEARCH, GatewayEvent.Type.TOOL_CALL, GatewayEvent.Type.RESOURCE_READ,
                GatewayEvent.Type.PROMPT_GOT, GatewayEvent.Type.SESSION_CLOSED)
TOOL_SEARCH = "ToolSearch"


def session_key(session: GatewaySession) -> str:
    return f"gateway-session:{session.pk}:{session.created_at.isoformat()}"


def export_event(session_pk: int, event: GatewayEvent) -> None:
    """Export what `event` adds to the session's trace. Never raises (logged instead)."""
    if event.type not in TRACED_TYPES or not telemetry.enabled():
        return
    try:
        session = GatewaySession.objects.select_related("profile").get(pk=session_pk)
        trace_id, session_span_id = telemetry.ids_for(session_key(session))
        if event.type == GatewayEvent.Type.SESSION_CLOSED:
            telemetry.export(session_span(session, event), trace_id=trace_id, root_span_id=session_span_id)
        else:
            telemetry.export(call_span(session, event), trace_id=trace_id, parent_span_id=session_span_id)
    except Exception:
        logger.exception("gateway session %s: queueing the span of event %s failed; the session is not affected",
                         session_pk, event.sequence)


def _ns(moment) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _common(session: GatewaySession) -> dict[str, Any]:
    return {
        "mcp.session.id": f"gateway-{session.pk}",
        "session.id": f"gateway-{session.pk}",
        "mcp.protocol.version": session.negotiated_version or session.protocol_version or None,
        "gen_ai.agent.name": session.profile.name,
        "gen_ai.agent.id": str(session.profile_id),
        "playground.gateway.client": f"{session.client_name} {session.client_version}".strip() or None,
    }


def session_span(session: GatewaySession, closed: GatewayEvent) -> telemetry.SpanRecord:
    calls = session.events.filter(type=GatewayEvent.Type.TOOL_CALL).count()
    searches = session.events.filter(type=GatewayEvent.Type.TOOL_SEARCH).count()
    return telemetry.SpanRecord(
        name=f"mcp.session {session.profile.name}", kind=SpanKind.SERVER,
        start_ns=_ns(session.created_at), end_ns=_ns(closed.created_at),
        attributes={**_common(session), "playground.gateway.tool_calls": calls, "playground.gateway.searches": searches,
                    "playground.gateway.discovered": list(session.discovered_tools or [])},
    )


def call_span(session: GatewaySession, event: GatewayEvent) -> telemetry.SpanRecord:
    payload = event.payload or {}
    end = _ns(event.created_at)
    start = _ns(event.created_at - timedelta(milliseconds=float(payload.get("duration_ms") or 0)))
    if event.type in (GatewayEvent.Type.RESOURCE_READ, GatewayEvent.Type.PROMPT_GOT):
        return upstream_span(session, event, start, end)
    attributes: dict[str, Any] = {**_common(session), "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool"}
    if event.type == GatewayEvent.Type.TOOL_SEARCH:
        name, error = TOOL_SEARCH, "tool_error" if payload.get("error") else ""
        attributes.update({
            "gen_ai.tool.name": TOOL_SEARCH,
            "gen_ai.tool.type": "function",
            "playground.toolsearch.backend": str(payload.get("backend") or ""),
            "playground.toolsearch.loaded": list(payload.get("added") or []),
            "playground.toolsearch.matches": len(payload.get("matches") or []),
        })
        if getattr(settings, "OTEL_TRACES_CAPTURE_QUERIES", False):
            attributes["playground.toolsearch.query"] = str(payload.get("query") or "")
    else:
        name = str(payload.get("name") or "")
        error = "refused" if payload.get("refused") else ("tool_error" if payload.get("is_error") else "")
        attributes.update({
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "extension" if name.startswith("mcp__") else "function",
            "playground.tool.permission": str(payload.get("permission") or ""),
            "playground.tool.simulated": bool(payload.get("simulated")),
            "playground.tool.via": str(payload.get("via") or "") or None,
        })
    return telemetry.SpanRecord(name=f"tools/call {name}", kind=SpanKind.SERVER, start_ns=start, end_ns=end,
                                attributes=attributes, error=error)


def upstream_span(session: GatewaySession, event: GatewayEvent, start: int, end: int) -> telemetry.SpanRecord:
    """A resource read or a prompt got from an upstream server. The resource's URI (a path, perhaps) and
    the prompt's arguments stay out; the prompt's name is the span's target, as MCP's conventions name it."""
    payload = event.payload or {}
    attributes: dict[str, Any] = {**_common(session), "playground.upstream.server": str(payload.get("server") or "") or None}
    if event.type == GatewayEvent.Type.RESOURCE_READ:
        name = "resources/read"
        attributes.update({"mcp.method.name": name, "playground.resource.contents": len(payload.get("contents") or [])})
    else:
        prompt = str(payload.get("name") or "")
        name = f"prompts/get {prompt}"
        attributes.update({"mcp.method.name": "prompts/get", "gen_ai.prompt.name": prompt,
                           "playground.prompt.messages": int(payload.get("messages") or 0)})
    return telemetry.SpanRecord(name=name, kind=SpanKind.SERVER, start_ns=start, end_ns=end, attributes=attributes,
                                error="upstream_error" if payload.get("error") else "")
