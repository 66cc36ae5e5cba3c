"""Traces out: a conversation run reaches a local OTLP/HTTP receiver as one trace of GenAI spans whose
numbers are the page's; off by default; a dead endpoint is logged once and never touches the run."""
from __future__ import annotations

import logging
import re

import pytest
from django.urls import reverse

from playground import telemetry
from playground.conversations.models import Event
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.traces import export_run
from tests.conversations.conftest import converse
from tests.otlp_receiver import OtlpReceiver
from tests.polling import wait_until

MESSAGE = "What is the weather forecast for Paris?"


def spans_of_trace(server: OtlpReceiver, count: int):
    telemetry.flush()
    return wait_until(lambda: len(server.received()) >= count and server.received(), f"{count} spans at the receiver", 30)


def test_a_demo_conversation_reaches_the_receiver_as_one_trace(receiver, tool_world, native_profile, admin_user, admin_client):
    conversation, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn"
    responses = list(Event.objects.filter(conversation=conversation, type="model_response").order_by("sequence"))
    model = Event.objects.filter(conversation=conversation, type="turn_started").first().payload["model"]
    expected = 1 + len(responses) + Event.objects.filter(conversation=conversation, type__in=("toolsearch_query", "tool_call")).count()
    spans = spans_of_trace(receiver, expected)
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert len(spans) == expected

    roots = [s for s in spans if not s.parent_span_id]
    assert [r.name for r in roots] == ["invoke_agent native"]
    root = roots[0]
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent_span_id == root.span_id for s in spans if s is not root)
    assert root.resource["service.name"] == "playground-test"
    assert root.attributes["session.id"] == f"conversation-{conversation.pk}"
    assert root.attributes["gen_ai.conversation.id"] == str(conversation.pk) and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    names = sorted(s.name for s in spans if s is not root)
    assert names == sorted([f"chat {model}"] * len(responses) + ["execute_tool ToolSearch",
                                                                                 "execute_tool mcp__weather__get_forecast"])

    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    for chat in chats:
        assert chat.kind == 3  # CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "playground.demo"
        assert chat.attributes["gen_ai.request.model"] == model != ""
        assert chat.attributes["gen_ai.conversation.id"] == str(conversation.pk)
        assert chat.start_ns <= chat.end_ns
    search = next(s for s in spans if s.name == "execute_tool ToolSearch")
    assert search.attributes["gen_ai.tool.name"] == "ToolSearch"
    assert "mcp__weather__get_forecast" in search.attributes["playground.toolsearch.loaded"]
    assert "playground.toolsearch.query" not in search.attributes  # a query is content: opt-in
    tool = next(s for s in spans if s.name == "execute_tool mcp__weather__get_forecast")
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["playground.tool.simulated"] is True

    # The numbers the page shows: each call's "in N / out M" and the conversation's dollars.
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    shown = [tuple(map(int, pair)) for pair in re.findall(r"in (\d+) / out (\d+)", page)]
    assert shown == [(c.attributes["gen_ai.usage.input_tokens"], c.attributes["gen_ai.usage.output_tokens"]) for c in chats]
    assert root.attributes["gen_ai.usage.input_tokens"] == sum(i for i, _ in shown)
    assert root.attributes["gen_ai.usage.output_tokens"] == sum(o for _, o in shown)
    page_cost = float(re.search(r'data-testid="cost-total" data-cost-usd="([0-9.]+)"', page).group(1))
    assert root.attributes["playground.cost_usd"] == pytest.approx(page_cost) and page_cost > 0
    assert sum(c.attributes["playground.cost_usd"] for c in chats) == pytest.approx(page_cost)

    # Nothing the person wrote nor any tool argument is in a span.
    everything = repr([s.attributes for s in spans])
    assert "Paris" not in everything and "weather forecast" not in everything


def test_the_query_is_on_its_span_only_when_asked(receiver, settings, tool_world, native_profile, admin_user):
    settings.OTEL_TRACES_CAPTURE_QUERIES = True
    converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    spans = wait_until(lambda: telemetry.flush() and [s for s in receiver.received() if s.name == "execute_tool ToolSearch"],
                       "the ToolSearch span", 30)
    assert spans[0].attributes["playground.toolsearch.query"]


def test_the_same_run_exported_twice_has_one_trace_id(receiver, tool_world, native_profile, admin_user):
    conversation, _ = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    assert export_run(conversation.pk)
    roots = wait_until(lambda: telemetry.flush() and len([s for s in receiver.received() if not s.parent_span_id]) >= 2
                       and [s for s in receiver.received() if not s.parent_span_id], "two exports of the run", 30)
    assert len({r.trace_id for r in roots}) == 1


def test_off_by_default(settings, fresh_provider, tool_world, native_profile, admin_user):
    assert settings.OTEL_TRACES_ENABLED is False
    conversation, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn"
    assert export_run(conversation.pk) is False
    assert fresh_provider.made() is None  # no provider, no exporter thread, nothing sent


def test_a_dead_endpoint_is_logged_once_and_the_run_goes_on(settings, monkeypatch, fresh_provider, tool_world, native_profile,
                                                             admin_user, caplog):
    with OtlpReceiver(status=503) as refusing:
        settings.OTEL_TRACES_ENABLED = True
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
        caplog.set_level(logging.WARNING)
        for _ in range(2):
            _, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
            assert outcome.reason == "end_turn"
            telemetry.flush()
        wait_until(lambda: len(refusing.paths) >= 2, "both exports tried", 30)
    warnings = [r for r in caplog.records if r.name == "playground.telemetry"]
    assert len(warnings) == 1 and "failed" in warnings[0].getMessage() and refusing.url in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING]


def test_a_trace_that_cannot_be_built_leaves_the_run_alone(receiver, monkeypatch, tool_world, native_profile, admin_user, caplog):
    from playground.conversations import traces

    def broken(conversation_id):
        raise ValueError("a payload nobody expected")

    monkeypatch.setattr(traces, "run_trace", broken)
    conversation, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn" and conversation.status == "idle"
    assert any("building or queueing its trace failed" in r.getMessage() for r in caplog.records)


def test_a_worker_process_that_stops_sends_what_it_still_holds(receiver, tool_world, native_profile, admin_user):
    from celery.signals import worker_process_shutdown

    converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    assert not receiver.received()  # queued: the batch processor sends every 5 s
    worker_process_shutdown.send(sender=None, pid=0, exitcode=0)
    assert any(not s.parent_span_id for s in receiver.received())  # sent before the process would exit


def test_the_demo_agent_on_openais_wire_is_traced_as_ours_with_estimated_tokens(settings, tool_world, native_profile, admin_user):
    # The regression: only "demo" was known as ours and as estimating, so these spans said
    # gen_ai.provider.name "demo-openai" and tokens_estimated False.
    from playground.conversations.providers.demo_openai import OpenAIWireDemoAgent
    from playground.conversations.traces import run_trace

    settings.DEMO_STREAM_WORDS_PER_SECOND = 0
    conversation, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=OpenAIWireDemoAgent())
    assert outcome.reason == "end_turn"
    root, _ = run_trace(conversation.pk)
    chats = [s for s in root.children if s.name.startswith("chat ")]
    assert chats and root.attributes["playground.tokens_estimated"] is True
    for chat in chats:
        assert chat.attributes["gen_ai.provider.name"] == "playground.demo"
        assert chat.attributes["playground.tokens_estimated"] is True


def test_a_turn_on_openais_wire_is_labelled_with_the_style_it_went_out_in(tool_world, native_profile, admin_user):
    """A native profile answered on OpenAI's wire runs as `openai-client`; its chat spans say so (they
    said "native", the planned shape, before the wire styles became one family)."""
    from playground.conversations.providers.demo_openai import OpenAIWireDemoAgent
    from playground.conversations.traces import run_trace

    conversation, outcome = converse(admin_user, MESSAGE, profile=native_profile, provider=OpenAIWireDemoAgent())
    assert outcome.reason == "end_turn"
    assert {e.payload["wire"] for e in Event.objects.filter(conversation=conversation, type="turn_started")} == {"openai-client"}
    root, _ = run_trace(conversation.pk)
    chats = [s for s in root.children if s.name.startswith("chat ")]
    assert chats and {c.attributes["playground.turn.wire_style"] for c in chats} == {"openai-client"}


def test_a_tool_changes_prediction_is_its_own_span_beside_the_style_named_chats(tool_world, admin_user):
    """The tool-changes style: the harness's prediction is a `predict_tools` span (no ToolSearch call of
    the model's), the chat spans name the style."""
    from playground.conversations.traces import run_trace
    from tests.conversations.conftest import make_profile

    profile = make_profile("changes-traced", wire_style="tool-changes", tool_changes_search=False)
    conversation, outcome = converse(admin_user, MESSAGE, profile=profile, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn"
    root, _ = run_trace(conversation.pk)
    predicted = [s for s in root.children if s.name == "predict_tools"]
    assert len(predicted) == 1 and not [s for s in root.children if s.name == "execute_tool ToolSearch"]
    assert predicted[0].attributes["playground.toolsearch.predicted"] is True
    assert "mcp__weather__get_forecast" in predicted[0].attributes["playground.toolsearch.loaded"]
    chats = [s for s in root.children if s.name.startswith("chat ")]
    assert chats and {c.attributes["playground.turn.wire_style"] for c in chats} == {"tool-changes"}
    # The first chat sent what its tool_addition added (no history had discovered it yet): as many
    # tools sent, and as few deferred, as the next chat's.
    added = len(predicted[0].attributes["playground.toolsearch.loaded"])
    assert added and len(chats) >= 2
    first, second = chats[0].attributes, chats[1].attributes
    assert (first["playground.turn.tools_sent"], first["playground.turn.tools_deferred"]) == (
        second["playground.turn.tools_sent"], second["playground.turn.tools_deferred"])
