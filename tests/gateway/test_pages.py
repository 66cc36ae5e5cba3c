"""The gateway's pages: tokens (created once, stored hashed, revoked) and sessions replayed from
their saved events."""
from __future__ import annotations

import hashlib

import pytest

from playground.gateway.events import record_event
from playground.gateway.models import GatewayEvent, GatewaySession, GatewayToken
from playground.gateway.tokens import authenticate, issue_token
from playground.registry.models import AgentProfile

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile():
    return AgentProfile.objects.create(name="Served profile", tool_search_mode="true")


def test_staff_create_a_token_that_is_shown_once_and_stored_hashed(admin_client, profile):
    response = admin_client.post("/gateway/tokens/", {"profile": profile.pk, "name": "Claude Code"})
    assert response.status_code == 200
    secret = response.context["created"]["secret"]
    assert secret.startswith("tsg_") and secret in response.content.decode()
    row = GatewayToken.objects.get()
    assert row.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in (row.prefix, row.token_hash, row.name)
    assert f"/gateway/mcp/{profile.pk}/" in response.content.decode()
    listing = admin_client.get("/gateway/tokens/").content.decode()
    assert secret not in listing and row.prefix in listing


def test_a_revoked_token_opens_nothing(admin_client, profile):
    row, secret = issue_token(profile, "laptop")
    assert authenticate(profile.pk, f"Bearer {secret}")[0] == row
    admin_client.post(f"/gateway/tokens/{row.pk}/revoke/")
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert authenticate(profile.pk, f"Bearer {secret}") == (None, f"revoked token #{row.pk} (laptop, {row.prefix}…)")


def test_a_token_opens_only_its_own_profile(profile):
    other = AgentProfile.objects.create(name="Other")
    _, secret = issue_token(profile, "x")
    assert authenticate(other.pk, f"Bearer {secret}")[0] is None
    assert authenticate(profile.pk, None) == (None, "no bearer token")
    assert authenticate(profile.pk, "Basic abc") == (None, "malformed Authorization header")


def test_gateway_pages_are_for_staff(viewer_client, profile):
    for url in ("/gateway/", "/gateway/tokens/"):
        assert viewer_client.get(url).status_code == 403
    assert viewer_client.post("/gateway/tokens/", {"profile": profile.pk, "name": "x"}).status_code == 403
    assert not GatewayToken.objects.exists()


def test_a_session_page_replays_its_events_in_order_and_follows_the_session_over_its_socket(admin_client, profile):
    session = GatewaySession.objects.create(session_id="abc123", profile=profile, client_name="claude-code", client_version="2.1.0")
    record_event(session.pk, GatewayEvent.Type.SESSION_STARTED, {"client_name": "claude-code", "client_version": "2.1.0"})
    record_event(session.pk, GatewayEvent.Type.TOOLS_LISTED, {"tools": ["echo", "ToolSearch"], "count": 2, "tokens": 321,
                                                              "tool_search": True, "deferred_count": 7})
    record_event(session.pk, GatewayEvent.Type.TOOL_SEARCH, {"query": "weather", "backend": "hybrid", "matches": ["mcp__w__f"],
                                                             "scores": [{"name": "mcp__w__f", "score": 1.5}], "added": ["mcp__w__f"]})
    record_event(session.pk, GatewayEvent.Type.TOOL_CALL, {"name": "mcp__w__f", "arguments": {"city": "Paris"}, "permission": "allow",
                                                           "is_error": False, "refused": False, "summary": "Sunny", "duration_ms": 12.5})
    assert list(session.events.values_list("sequence", flat=True)) == [1, 2, 3, 4]

    listing = admin_client.get("/gateway/").content.decode()
    assert "claude-code" in listing and "Served profile" in listing
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    for text in ("claude-code", "2.1.0", "321 tokens", "weather", "mcp__w__f", "Paris", "Sunny", "12.5 ms"):
        assert text in page
    assert page.index('data-sequence="1"') < page.index('data-sequence="2"') < page.index('data-sequence="4"')
    assert 'data-last-sequence="4"' in page and f'ws-connect="/ws/gateway/sessions/{session.pk}/"' in page


def test_staff_answer_a_waiting_prompt_once(admin_client, profile):
    from playground.gateway.models import GatewayPrompt

    session = GatewaySession.objects.create(session_id="s-1", profile=profile)
    prompt = GatewayPrompt.objects.create(session=session, tool_name="Write", arguments={"file_path": "a"}, reason="ask Write")
    record_event(session.pk, GatewayEvent.Type.PERMISSION_ASKED, {"prompt_id": prompt.pk, "name": "Write",
                                                                  "arguments": {"file_path": "a"}, "reason": "ask Write"})
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    assert 'data-testid="answer-once"' in page and "Approve once" in page  # the conversation prompt's buttons
    response = admin_client.post(f"/gateway/prompts/{prompt.pk}/answer/", {"choice": "deny"})
    assert response.status_code == 302
    prompt.refresh_from_db()
    assert prompt.status == "denied" and prompt.answered_by.username == "alice"
    admin_client.post(f"/gateway/prompts/{prompt.pk}/answer/", {"answer": "allowed"})  # too late: the first answer stands
    prompt.refresh_from_db()
    assert prompt.status == "denied"
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    assert "Approve once" not in page and "denied by alice" in page
    assert admin_client.post(f"/gateway/prompts/{prompt.pk}/answer/", {"answer": "maybe"}).status_code == 400


def test_a_session_page_shows_remembered_tools_resource_reads_prompts_and_client_confirmations(admin_client, profile):
    session = GatewaySession.objects.create(session_id="s-every", profile=profile, client_name="inspector-cli")
    record_event(session.pk, GatewayEvent.Type.SESSION_STARTED, {"client_name": "inspector-cli", "remembered": ["word_count"]})
    record_event(session.pk, GatewayEvent.Type.RESOURCE_READ, {"uri": "demo://readme", "server": "demo", "duration_ms": 3.5,
                                                               "contents": [{"mime_type": "text/markdown", "chars": 80, "blob": False}]})
    record_event(session.pk, GatewayEvent.Type.RESOURCE_READ, {"uri": "x://y", "error": "No resource 'x://y' is offered here",
                                                               "duration_ms": 0.4})
    record_event(session.pk, GatewayEvent.Type.PROMPT_GOT, {"name": "mcp__demo__plan_trip", "server": "demo", "messages": 1,
                                                            "arguments": {"city": "Oslo"}, "duration_ms": 2.0})
    record_event(session.pk, GatewayEvent.Type.PERMISSION_ASKED, {"prompt_id": 0, "name": "Write", "arguments": {},
                                                                  "reason": "ask Write", "ask_client": True})
    record_event(session.pk, GatewayEvent.Type.PERMISSION_ANSWERED, {"prompt_id": 0, "name": "Write", "answer": "allowed",
                                                                     "by": "the person at the MCP client (elicitation)"})
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    for text in ("earlier sessions", "<code>word_count</code>", "<code>demo://readme</code> from demo", "text/markdown (80 characters)",
                 "No resource &#x27;x://y&#x27; is offered here", "<code>mcp__demo__plan_trip</code> from demo", "1 message",
                 "Oslo", "asked to confirm too (MCP elicitation)", "allowed by the person at the MCP client (elicitation)"):
        assert text in page, text


def test_a_session_page_says_how_the_profiles_wire_style_is_served(admin_client, profile):
    """A tool-changes profile's harness predicts from a person's message, which no MCP client sends:
    its session page says so, and that ToolSearch serves instead (even where the profile drops it)."""
    plain = GatewaySession.objects.create(session_id="plain1", profile=profile, client_name="c")
    page = admin_client.get(f"/gateway/sessions/{plain.pk}/").content.decode()
    assert 'data-testid="gateway-wire-style" data-wire="native"' in page and "tool_addition" not in page
    changes = AgentProfile.objects.create(name="Predicting", tool_search_mode="true", wire_style="tool-changes",
                                          tool_changes_search=False)
    session = GatewaySession.objects.create(session_id="changes1", profile=changes, client_name="c")
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    assert 'data-wire="tool-changes"' in page
    assert "MCP has no tool_addition" in page and "which this profile&#x27;s conversations leave out" in page
    changes.tool_changes_search = True
    changes.save()
    page = admin_client.get(f"/gateway/sessions/{session.pk}/").content.decode()
    assert "MCP has no tool_addition" in page and "leave out" not in page
