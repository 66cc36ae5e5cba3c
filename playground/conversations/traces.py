"""A finished conversation run as an OpenTelemetry trace, built from its saved events (docs/traces.md).

Why from the events and not from hooks in the loop: a run may pause on a permission prompt and
resume in another worker, and the events are the one record that holds all of it in order, with the
times and durations the page shows. Built from them, a trace is the same whichever process ran the
loop, carries exactly the token counts and dollars the page shows, and costs the loop nothing while
it runs: one read of the run's events after its last event is saved, then the SDK's batch
processor sends from its own thread.

One run (a person's message and everything it caused) is one trace:

    invoke_agent <profile>            the run: from the message to its last event
      chat <model>                    each model call (CLIENT): usage, finish reason, dollars
      execute_tool ToolSearch         each ToolSearch: backend, tools it loaded
      execute_tool <tool>             each tool call: permission, error, simulated
        invoke_agent <subagent>       an Agent call's subagent run, with its own calls inside

Nothing secret goes in: no message text, no tool arguments or results, no request bodies; the
ToolSearch query only with OTEL_TRACES_CAPTURE_QUERIES (a query a model wrote is a tool argument).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django.conf import settings
from opentelemetry.trace import SpanKind

from playground import telemetry
from playground.conversations.models import Conversation, Event
from playground.conversations.providers import otel_provider_name, provider_estimates_usage
from playground.conversations.providers.base import USAGE_ESTIMATE
from playground.conversations.selectors import turn_wire
from playground.engine.pricing import Usage, priced_model
from playground.conversations.subagents import AGENT_TOOL_NAME
from playground.engine.tools import TOOL_SEARCH_NAME
from playground.engine.wires.registry import wire_style
from playground.registry.prices import current_price_table

logger = logging.getLogger(__name__)

# The events a trace reads: not the request bodies nor the announcements' texts.
TRACED_TYPES = ("message", "turn_started", "model_response", "toolsearch_query", "tool_call", "tool_result", "error",
                "cancelled", "turn_finished", "status", "permission_prompt", "permission_answer")


def otel_wire_name(name: str) -> str:
    """A turn's wire style as traces name it (the style's `otel_name`; an unknown one as it was saved)."""
    try:
        return wire_style(name).otel_name
    except ValueError:
        return name


def export_run(conversation_id: int) -> bool:
    """Export the conversation's latest finished run, if traces are on. Never raises: a trace that
    cannot be built or queued is logged and the run is not affected. True when spans were queued."""
    if not telemetry.enabled():
        return False
    try:
        built = run_trace(conversation_id)
        if built is None:
            return False
        root, key = built
        trace_id, _ = telemetry.ids_for(key)
        telemetry.export(root, trace_id=trace_id)
        return True
    except Exception:
        logger.exception("conversation %s: building or queueing its trace failed; the run is not affected", conversation_id)
        return False


def _latest_run_start(conversation_id: int) -> int | None:
    """The sequence of the person's message that started the latest run."""
    return (Event.objects.filter(conversation_id=conversation_id, type="message", payload__role="user")
            .order_by("-sequence").values_list("sequence", flat=True).first())


def run_key(conversation_id: int, start: int) -> str:
    """What a run's trace id is drawn from (conversation and message: exporting it twice gives one trace id)."""
    return f"conversation:{conversation_id}:run:{start}"


def run_trace(conversation_id: int) -> tuple[telemetry.SpanRecord, str] | None:
    """The latest run's span tree and the key its trace id is drawn from (`run_key`)."""
    conversation = Conversation.objects.select_related("profile", "owner").get(pk=conversation_id)
    start = _latest_run_start(conversation_id)
    if start is None:
        return None
    events = list(Event.objects.filter(conversation_id=conversation_id, sequence__gte=start, type__in=TRACED_TYPES)
                  .order_by("sequence"))
    return RunTrace(conversation, events).build(), run_key(conversation_id, start)


def latest_trace(conversation_id: int) -> dict[str, str] | None:
    """The latest run's trace id (32 hex digits, as trace UIs show it) and its page in the trace UI
    (TRACE_URL_TEMPLATE; "" when none), for the conversation page. None while traces are off or no
    run was started: there is no trace to point at."""
    if not telemetry.enabled():
        return None
    start = _latest_run_start(conversation_id)
    if start is None:
        return None
    trace_id = format(telemetry.ids_for(run_key(conversation_id, start))[0], "032x")
    return {"id": trace_id, "url": telemetry.trace_url(trace_id)}


def _ns(moment) -> int:
    return int(moment.timestamp() * 1_000_000_000)


class RunTrace:
    def __init__(self, conversation: Conversation, events: list[Event]) -> None:
        self.conversation = conversation
        self.events = events
        self.table = current_price_table()
        self.capture_queries = bool(getattr(settings, "OTEL_TRACES_CAPTURE_QUERIES", False))
        self.turns = {e.sequence: e for e in events if e.type == "turn_started"}
        self.by_parent: dict[int | None, list[Event]] = defaultdict(list)
        for event in events:
            self.by_parent[event.parent_sequence].append(event)
        self.results = {e.payload.get("tool_use_id"): e for e in events if e.type == "tool_result"}
        self.previous = {}  # sequence → the created_at of the event before it (a ToolSearch's start)
        for before, after in zip(events, events[1:]):
            self.previous[after.sequence] = before.created_at

    def build(self) -> telemetry.SpanRecord:
        snapshot = self.conversation.profile_snapshot or {}
        name = str(snapshot.get("name") or getattr(self.conversation.profile, "name", "") or "default settings")
        root = self.agent_span(name, self.by_parent[None], self.events[0].created_at, self.events[-1].created_at)
        root.attributes.update({
            "playground.conversation.url": f"/conversations/{self.conversation.pk}/",
            "playground.profile.tool_search_mode": str(snapshot.get("tool_search_mode") or ""),
        })
        # On every span, so a trace UI filters any span (a slow call, a failed tool) by session,
        # person, profile and wire style, not only the root.
        for span in root.walk():
            span.attributes.update(self.run_attributes(name, snapshot))
        final = [e for e in self.by_parent[None] if e.type == "turn_finished" and e.payload.get("final")]
        if final:
            root.attributes["playground.run.end_reason"] = str(final[-1].payload.get("reason") or "")
        if any(e.type == "cancelled" for e in self.events):
            root.attributes["playground.run.end_reason"] = "cancelled"
        return root

    def run_attributes(self, profile: str, snapshot: dict[str, Any]) -> dict[str, Any]:
        person = self.run_author()
        return {
            "gen_ai.conversation.id": str(self.conversation.pk),
            "session.id": f"conversation-{self.conversation.pk}",  # OTel's session attribute: Langfuse groups traces by it
            "gen_ai.agent.id": str(self.conversation.profile_id or ""),
            "playground.profile.name": profile,
            # The style the run's requests went out in (its first turn's, as the page's header says),
            # else the profile's: a profile that leaves it to the default names none.
            "playground.profile.wire_style": otel_wire_name(self.run_wire() or str(snapshot.get("wire_style") or "")) or None,
            # OTEL_TRACES_ENDUSER_ID: nobody (off), a keyed hash, or the username. `user.id` too: the
            # name Langfuse and Phoenix (OpenInference) filter traces by.
            "enduser.id": person,
            "user.id": person,
        }

    def run_wire(self) -> str:
        first = next((e for e in self.by_parent[None] if e.type == "turn_started"), None)
        return turn_wire(first.payload or {}) if first is not None else ""

    def run_author(self) -> str | None:
        """Who sent the run's message (an admin acting in someone's conversation is the one who ran it)."""
        message = next((e for e in self.events if e.type == "message" and (e.payload or {}).get("role") == "user"), None)
        author = str((message.payload or {}).get("author") or "") if message is not None else ""
        return telemetry.enduser_id(author or self.conversation.owner.get_username())

    def agent_span(self, agent: str, events: list[Event], started, ended) -> telemetry.SpanRecord:
        """An invoke_agent span over one agent's events (the main run, or a subagent's)."""
        span = telemetry.SpanRecord(name=f"invoke_agent {agent}", start_ns=_ns(started), end_ns=_ns(ended))
        first_turn = next((e for e in events if e.type == "turn_started"), None)
        provider = str(first_turn.payload.get("provider") or "") if first_turn is not None else ""
        totals = {"input": 0, "output": 0, "cost": 0.0, "priced": True}
        for event in events:
            child = None
            if event.type == "model_response":
                child = self.chat_span(event, totals)
            elif event.type == "toolsearch_query":
                child = self.search_span(event)
            elif event.type == "tool_call":
                child = self.tool_span(event)
            elif event.type == "error" and event.payload.get("kind") not in ("max_turns",):
                span.error = span.error or str(event.payload.get("kind") or "error")
            if child is not None:
                span.children.append(child)
        span.attributes.update({
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": otel_provider_name(provider),
            "gen_ai.system": otel_provider_name(provider),  # the name before gen_ai.provider.name: older backends read it
            "gen_ai.request.model": str(first_turn.payload.get("model") or "") if first_turn is not None else None,
            "gen_ai.usage.input_tokens": totals["input"],
            "gen_ai.usage.output_tokens": totals["output"],
            "playground.cost_usd": round(totals["cost"], 8) if totals["priced"] else None,
            "playground.turns": sum(1 for e in events if e.type == "turn_started"),
            "playground.tokens_estimated": provider_estimates_usage(provider),
        })
        return span

    def chat_span(self, event: Event, totals: dict[str, Any]) -> telemetry.SpanRecord:
        payload = event.payload or {}
        turn = self.turns.get(event.turn_sequence)
        turn_payload = turn.payload if turn is not None else {}
        model = priced_model(payload.get("model"), turn_payload.get("model"))
        provider = str(turn_payload.get("provider") or "")
        usage = Usage.of(payload.get("usage"))
        cost = self.table.call_cost(usage, model, payload.get("cache_ttl"))
        totals["input"] += usage.input_total
        totals["output"] += usage.output
        if cost is None:
            totals["priced"] = False
        else:
            totals["cost"] += cost
        end = _ns(event.created_at)
        tokens = turn_payload.get("tokens") or {}
        decision = turn_payload.get("decision") or {}
        return telemetry.SpanRecord(
            name=f"chat {model}", kind=SpanKind.CLIENT,
            start_ns=end - int(float(payload.get("duration_ms") or 0) * 1_000_000), end_ns=end,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": otel_provider_name(provider),
                "gen_ai.system": otel_provider_name(provider),
                "gen_ai.request.model": model,
                "gen_ai.response.finish_reasons": [str(payload.get("stop_reason") or "")],
                # The semantic conventions count cached input in input_tokens (the API reports it apart).
                "gen_ai.usage.input_tokens": usage.input_total,
                "gen_ai.usage.output_tokens": usage.output,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                "playground.cost_usd": cost,
                # The response says where its usage came from; one saved before it did, its provider.
                "playground.tokens_estimated": (payload["usage_source"] == USAGE_ESTIMATE if payload.get("usage_source")
                                                else provider_estimates_usage(provider)),
                "playground.turn.wire_style": otel_wire_name(turn_wire(turn_payload)),
                "playground.turn.tool_search": bool(decision.get("enabled")),
                "playground.turn.tools_sent": int(turn_payload.get("loaded_count", len(turn_payload.get("loaded_tools") or []))),
                "playground.turn.tools_deferred": int(turn_payload.get("deferred_count", len(turn_payload.get("deferred_tools") or []))),
                "playground.turn.tool_tokens_sent": int(tokens.get("sent_tokens") or 0),
                "playground.turn.tool_tokens_all_tools": int(tokens.get("baseline_tokens") or 0),
            },
        )

    def search_span(self, event: Event) -> telemetry.SpanRecord:
        payload = event.payload or {}
        end = _ns(event.created_at)
        start = _ns(self.previous.get(event.sequence, event.created_at))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": TOOL_SEARCH_NAME,
            "gen_ai.tool.call.id": str(payload.get("tool_use_id") or ""),
            "gen_ai.tool.type": "function",
            "playground.toolsearch.backend": str(payload.get("backend") or ""),
            "playground.toolsearch.loaded": list(payload.get("loaded") or []),
            "playground.toolsearch.matches": len(payload.get("loaded") or []),
            "playground.toolsearch.deferred_tools": int(payload.get("total_deferred_tools") or 0),
            "playground.toolsearch.server_side": bool(payload.get("server_side")),
        }
        name = f"execute_tool {TOOL_SEARCH_NAME}"
        if payload.get("predicted"):
            # The harness's prediction before a turn (tool-changes wire style): no tool call of the model's.
            name = "predict_tools"
            attributes.update({"gen_ai.operation.name": "playground.predict_tools", "gen_ai.tool.name": None,
                               "gen_ai.tool.call.id": None, "gen_ai.tool.type": None,
                               "playground.toolsearch.predicted": True,
                               "playground.tool_changes.removed": list(payload.get("removed") or [])})
        if self.capture_queries:
            attributes["playground.toolsearch.query"] = str(payload.get("query") or "")
        return telemetry.SpanRecord(name=name, start_ns=start, end_ns=end, attributes=attributes,
                                    error="toolsearch_error" if payload.get("error") else "")

    def tool_span(self, call: Event) -> telemetry.SpanRecord:
        payload = call.payload or {}
        name = str(payload.get("name") or "")
        result = self.results.get(payload.get("tool_use_id"))
        result_payload = result.payload if result is not None else {}
        end = _ns(result.created_at if result is not None else call.created_at)
        start = min(_ns(call.created_at), end - int(float(result_payload.get("duration_ms") or 0) * 1_000_000))
        error = ""
        if result is None:
            error = "no_result"  # the run ended (cancelled, paused and never answered) before the call did
        elif result_payload.get("is_error"):
            error = "tool_error"
        span = telemetry.SpanRecord(
            name=f"execute_tool {name}", start_ns=start, end_ns=end, error=error,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": str(payload.get("tool_use_id") or ""),
                # MCP tools extend the agent from outside; built-ins and catalog entries are its functions.
                "gen_ai.tool.type": "extension" if name.startswith("mcp__") else "function",
                "playground.tool.permission": str(payload.get("permission") or ""),
                "playground.tool.simulated": bool(result_payload.get("simulated")),
            },
        )
        if name == AGENT_TOOL_NAME:
            children = self.by_parent.get(call.sequence, [])
            if children:
                agent = str(next((e.payload.get("subagent") for e in children if e.type == "turn_started"), "") or "subagent")
                span.children.append(self.agent_span(agent, children, children[0].created_at, children[-1].created_at))
        return span
