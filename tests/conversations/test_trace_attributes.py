"""Traces a trace UI can filter by person and session, and the conversation page's link to its trace:
every span of a run carries the session, the profile and the wire style; the person (`enduser.id`)
only when OTEL_TRACES_ENDUSER_ID asks, a keyed hash unless the username is asked for."""
from __future__ import annotations

import hashlib
import hmac
import re

from django.urls import reverse

from playground import telemetry
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.traces import run_trace
from tests.conversations.conftest import converse
from tests.polling import wait_until

MESSAGE = "What is the weather forecast for Paris?"
TEMPLATE = "https://traces.example.test/project/demo/traces/{trace_id}"


def spans_of(conversation_pk: int) -> list[telemetry.SpanRecord]:
    root, _ = run_trace(conversation_pk)
    return list(root.walk())


def test_every_span_carries_session_profile_and_wire_style_and_no_person_by_default(settings, tool_world, native_profile, admin_user):
    assert settings.OTEL_TRACES_ENDUSER_ID == "off"
    conversation, _ = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    spans = spans_of(conversation.pk)
    assert len(spans) >= 3
    for span in spans:
        assert span.attributes["session.id"] == f"conversation-{conversation.pk}"
        assert span.attributes["gen_ai.conversation.id"] == str(conversation.pk)
        assert span.attributes["gen_ai.agent.id"] == str(native_profile.pk)
        assert span.attributes["playground.profile.name"] == "native"
        assert span.attributes["playground.profile.wire_style"] == "native"
        assert span.attributes["enduser.id"] is None and span.attributes["user.id"] is None  # left out on export
    assert "alice" not in repr([s.attributes for s in spans])


def test_the_person_is_a_keyed_hash_when_asked_and_the_username_only_when_asked_for(settings, tool_world, native_profile, admin_user):
    settings.OTEL_TRACES_ENDUSER_ID = "hashed"
    conversation, _ = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    expected = hmac.new(settings.SECRET_KEY.encode(), b"enduser:alice", hashlib.sha256).hexdigest()[:32]
    spans = spans_of(conversation.pk)
    assert {s.attributes["enduser.id"] for s in spans} == {expected} == {s.attributes["user.id"] for s in spans}
    assert "alice" not in repr([s.attributes for s in spans])
    settings.OTEL_TRACES_ENDUSER_ID = "username"
    assert {s.attributes["enduser.id"] for s in spans_of(conversation.pk)} == {"alice"}


def test_the_page_shows_the_exported_trace_id_and_links_it_through_the_template(receiver, settings, tool_world, native_profile,
                                                                                 admin_user, admin_client):
    settings.TRACE_URL_TEMPLATE = TEMPLATE
    settings.OTEL_TRACES_ENDUSER_ID = "hashed"
    conversation, _ = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    root = wait_until(lambda: telemetry.flush() and next((s for s in receiver.received() if not s.parent_span_id), None),
                      "the run's root span", 30)
    assert root.attributes["enduser.id"] and root.attributes["session.id"] == f"conversation-{conversation.pk}"
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    shown = re.search(r'data-testid="trace-id">([0-9a-f]{32})<', page).group(1)
    assert shown == root.trace_id  # the id the trace UI got
    assert f'href="https://traces.example.test/project/demo/traces/{shown}"' in page

    settings.TRACE_URL_TEMPLATE = ""  # the id without a trace UI to link to
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert f">{shown}<" in page and 'data-testid="trace-link"' not in page


def test_no_trace_line_while_traces_are_off(settings, tool_world, native_profile, admin_user, admin_client):
    settings.TRACE_URL_TEMPLATE = TEMPLATE
    conversation, _ = converse(admin_user, MESSAGE, profile=native_profile, provider=DemoAgentProvider())
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="trace"' not in page and "traces.example.test" not in page
