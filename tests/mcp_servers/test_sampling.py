"""Sampling at the workbench, against the demo server's `ask_model` tool (sampling/createMessage):
the view returns as soon as the server asks (nothing waits on the person), the request is saved and
shown, and a typed answer, a decline or a profile's model (the offline demo agent, named as such)
settles it; the call's result then lands in the history. The agent loop's sessions offer no
sampling, so a conversation's call never waits on someone."""
from __future__ import annotations

import time

import pytest
from django.urls import reverse

from playground.conversations.sampling import answer_sampling_request
from playground.mcp_servers import server_requests, services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.models import McpCallRecord, McpServerRequest
from playground.registry.models import AgentProfile, Tool
from tests.mcp_servers.conftest import demo_config
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def synced_demo(stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    return stdio_demo_row


def ask(client, server, question):
    tool = Tool.objects.get(name="mcp__demo__ask_model")
    started = time.monotonic()
    response = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]),
                           {f"t{tool.pk}-mode": "form", f"t{tool.pk}-arg__question": question, f"t{tool.pk}-timeout": "60"}, **HTMX)
    return response.content.decode(), time.monotonic() - started


def answer(client, server, row, **data):
    return client.post(reverse("mcp_servers:server_request_answer", args=[server.pk, row.pk]), data, **HTMX).content.decode()


def ask_model_record(server):
    return McpCallRecord.objects.filter(server=server, kind="tool", name="mcp__demo__ask_model").first()


def test_a_sampling_request_waits_for_a_typed_answer_without_holding_the_view(admin_client, synced_demo):
    html, took = ask(admin_client, synced_demo, "What is the capital of France?")
    assert 'data-testid="call-waiting"' in html, html
    assert took < 20  # returned when the server asked, not when the 60 s call ended
    row = McpServerRequest.objects.get(server=synced_demo)
    assert row.kind == "sampling" and row.is_pending
    assert row.params["messages"][0]["content"]["text"] == "What is the capital of France?"
    assert row.params["maxTokens"] == 200 and "demo MCP server" in row.params["systemPrompt"]
    assert ask_model_record(synced_demo) is None  # the call is still running

    # While it waits, the page shows the request with its answer form.
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[synced_demo.pk])).content.decode()
    assert f'data-request="{row.pk}"' in page and "What is the capital of France?" in page and 'data-testid="sampling-form"' in page

    assert "Type the answer" in answer(admin_client, synced_demo, row, action="answer", text="  ")
    card = answer(admin_client, synced_demo, row, action="answer", text="Paris.")
    assert 'data-status="answered"' in card and "by hand" in card
    record = wait_until(lambda: ask_model_record(synced_demo), timeout=30, what="the call's result")
    assert record.ok and "answered: Paris." in record.summary and "typed by alice" in record.summary
    # Answered twice: the second is refused plainly.
    assert "no longer waiting" in answer(admin_client, synced_demo, row, action="answer", text="Lyon")


def test_a_declined_request_is_an_error_for_the_server(admin_client, synced_demo):
    html, _ = ask(admin_client, synced_demo, "Anything?")
    assert 'data-testid="call-waiting"' in html
    row = McpServerRequest.objects.get(server=synced_demo)
    assert 'data-status="declined"' in answer(admin_client, synced_demo, row, action="decline")
    record = wait_until(lambda: ask_model_record(synced_demo), timeout=30, what="the call's result")
    assert not record.ok and "declined" in record.summary


def test_a_profiles_model_answers_and_says_which_one(admin_client, synced_demo, settings):
    settings.ANTHROPIC_API_KEY = ""
    profile = AgentProfile.objects.create(name="sampler")
    html, _ = ask(admin_client, synced_demo, "Say hello")
    assert 'data-testid="call-waiting"' in html
    row = McpServerRequest.objects.get(server=synced_demo)
    queued = []
    from playground.mcp_servers import views

    original = views.queue_task
    views.queue_task = lambda name, *args: queued.append((name, args))
    try:
        card = answer(admin_client, synced_demo, row, action="model", profile=str(profile.pk))
    finally:
        views.queue_task = original
    assert queued == [("conversations.answer_sampling_request", (row.pk, profile.pk, int(admin_client.session["_auth_user_id"])))]
    assert "Asked the model of profile sampler" in card
    assert answer_sampling_request(*queued[0][1]) == "answered"  # what the worker runs
    row.refresh_from_db()
    assert row.status == "answered" and row.answered_with == "offline demo agent (profile sampler)"
    record = wait_until(lambda: ask_model_record(synced_demo), timeout=30, what="the call's result")
    assert record.ok and "offline demo agent (profile sampler)" in record.summary


def test_a_request_nobody_answers_expires_and_the_server_is_told(admin_client, synced_demo, settings):
    settings.MCP_SERVER_REQUEST_WAIT_SECONDS = 1
    ask(admin_client, synced_demo, "Hello?")
    record = wait_until(lambda: ask_model_record(synced_demo), timeout=30, what="the call's result")
    assert not record.ok and "Nobody answered within 1 s" in record.summary
    assert McpServerRequest.objects.get(server=synced_demo).status == "expired"


def test_the_agent_loops_sessions_offer_no_sampling(synced_demo):
    outcome, _ = call_registered_tool(synced_demo, "mcp__demo__ask_model", {"question": "hi"}, timeout=20)
    assert outcome.is_error and not McpServerRequest.objects.exists()
    assert not server_requests.waiting_on_person(synced_demo.pk)


def test_bad_answers_are_clear_errors(admin_client, synced_demo):
    ask(admin_client, synced_demo, "Q")
    row = McpServerRequest.objects.get(server=synced_demo)
    url = reverse("mcp_servers:server_request_answer", args=[synced_demo.pk, row.pk])
    assert admin_client.post(url, {"action": "explode"}).status_code == 400
    assert "Choose the profile" in answer(admin_client, synced_demo, row, action="model", profile="x")
    assert "too long" in answer(admin_client, synced_demo, row, action="answer", text="x" * 20_001)
    answer(admin_client, synced_demo, row, action="decline")
