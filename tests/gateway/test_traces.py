"""A gateway session's searches and calls reach an OTLP receiver as they happen, under one session span
whose ids every process draws alike; no argument, result or session id goes in a span."""
from __future__ import annotations

from playground import telemetry
from playground.gateway.models import GatewaySession
from playground.gateway.server import _call, record_session_closed
from playground.gateway.traces import session_key
from tests.polling import wait_until


def test_a_sessions_calls_and_its_end_form_one_trace(gateway_world, receiver):
    info = {"profile_id": gateway_world["profile"].pk, "token_id": None}
    client = ("pytest", "1", "2025-11-25")
    _call("trace-1", info, client, "ToolSearch", {"query": "count words"})
    _call("trace-1", info, client, "word_count", {"text": "secret words here"})
    _call("trace-1", info, client, "calculator", {"expression": "1+1"})  # not found by the search: refused
    telemetry.flush()
    calls = sorted(wait_until(lambda: len(receiver.received()) >= 3 and receiver.received(), "the three call spans", 30),
                   key=lambda s: s.start_ns)
    session = GatewaySession.objects.get(session_id="trace-1")
    trace_id, session_span_id = telemetry.ids_for(session_key(session))
    assert [s.name for s in calls] == ["tools/call ToolSearch", "tools/call word_count", "tools/call calculator"]
    assert {s.trace_id for s in calls} == {f"{trace_id:032x}"}
    assert {s.parent_span_id for s in calls} == {f"{session_span_id:016x}"}
    search, count, refused = calls
    assert search.attributes["mcp.method.name"] == "tools/call" and search.kind == 2  # SERVER
    assert search.attributes["playground.toolsearch.loaded"] == ["word_count"]
    assert count.attributes["gen_ai.tool.name"] == "word_count" and count.attributes["gen_ai.operation.name"] == "execute_tool"
    assert count.status_code != 2 and refused.status_code == 2 and refused.attributes["error.type"] == "refused"
    assert count.attributes["mcp.session.id"] == f"gateway-{session.pk}"

    record_session_closed("trace-1")
    telemetry.flush()
    root = wait_until(lambda: [s for s in receiver.received() if not s.parent_span_id], "the session span", 30)[0]
    assert root.name == "mcp.session Gateway test profile"
    assert root.span_id == f"{session_span_id:016x}" and root.trace_id == f"{trace_id:032x}"
    assert root.attributes["playground.gateway.tool_calls"] == 2 and root.attributes["playground.gateway.searches"] == 1

    everything = repr([s.attributes for s in receiver.received()])
    assert "secret words" not in everything and "count words" not in everything and "trace-1" not in everything


def test_nothing_is_sent_when_traces_are_off(gateway_world, fresh_provider):
    info = {"profile_id": gateway_world["profile"].pk, "token_id": None}
    _call("trace-off", info, ("pytest", "1", "2025-11-25"), "echo", {"text": "hi"})
    record_session_closed("trace-off")
    assert fresh_provider.made() is None


def test_resource_reads_and_prompts_are_spans_without_their_uri_or_arguments(gateway_world):
    from playground.gateway.models import GatewayEvent
    from playground.gateway.traces import call_span

    session = GatewaySession.objects.create(session_id="trace-up", profile=gateway_world["profile"])
    read = GatewayEvent.objects.create(session=session, sequence=1, type=GatewayEvent.Type.RESOURCE_READ, payload={
        "uri": "file:///home/alice/secret-plan.txt", "server": "demo", "contents": [{"mime_type": "text/plain", "chars": 5}],
        "duration_ms": 4.0})
    failed = GatewayEvent.objects.create(session=session, sequence=2, type=GatewayEvent.Type.PROMPT_GOT, payload={
        "name": "summarise", "arguments": {"text": "private words"}, "server": "demo", "error": "boom", "duration_ms": 1.0})
    span = call_span(session, read)
    assert span.name == "resources/read" and span.attributes["mcp.method.name"] == "resources/read"
    assert abs(span.end_ns - span.start_ns - 4_000_000) < 2_000 and not span.error  # to the microsecond
    prompt = call_span(session, failed)
    assert prompt.name == "prompts/get summarise" and prompt.attributes["gen_ai.prompt.name"] == "summarise"
    assert prompt.error == "upstream_error"
    assert "secret-plan" not in repr(span.attributes) and "private words" not in repr(prompt.attributes)
