"""OAuth to remote MCP servers (mcp_servers/oauth.py, oauth_connect.py, oauth_views.py) against a
local authorization server and a protected demo MCP server (`oauth_doubles.py`): a 401 offers
Connect; Connect runs authorization code + PKCE through our callback; sync and calls use the sealed
token; an expired one is refreshed and stored again; a forged or replayed answer and a wrong
verifier are refused with a clear message; no credential reaches a page, log or export."""
from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.urls import reverse
from django.utils import timezone

from playground.mcp_servers import services
from playground.mcp_servers.connection import McpAuthorizationNeeded, call_server_tool
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.models import McpServer, McpServerAuth
from playground.mcp_servers.transports import ServerConfig
from playground.mcp_servers.vault import unseal
from tests.mcp_servers.oauth_doubles import OAuthProtectedServer
from tests.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def protected():
    server = OAuthProtectedServer()
    yield server
    server.stop()


@pytest.fixture
def remote(protected):
    return McpServer.objects.create(name="remote", transport="http", url=protected.url, protocol_era="legacy")


def start_connect(client, server, **fields):
    """Press Connect: the browser is sent to the authorization server's /authorize."""
    response = client.post(reverse("mcp_servers:server_oauth_connect", args=[server.pk]), fields)
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def authorize(location: str) -> str:
    """The person approves at the authorization server: where it sends the browser back."""
    answer = httpx2.get(location)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


def come_back(client, callback: str):
    parts = urlsplit(callback)
    return client.get(f"{parts.path}?{parts.query}")


def connect(client, server):
    callback = authorize(start_connect(client, server))
    response = come_back(client, callback)
    assert response.status_code == 302 and response["Location"] == reverse("mcp_servers:server_detail", args=[server.pk])
    return wait_until(lambda: McpServerAuth.objects.filter(server=server, connected_at__isnull=False).first(),
                      "the grant to be connected", timeout=30,
                      details=lambda: McpServerAuth.objects.filter(server=server).values("last_error", "pending_state").first())


def text_of(answer) -> str:
    return " ".join(block.get("text", "") for block in answer.content)


def stored_tokens(server) -> dict:
    import json

    return json.loads(unseal(McpServerAuth.objects.get(server=server).tokens_sealed))


def test_a_server_answering_401_offers_connect_instead_of_an_error(admin_client, viewer_user, remote, client):
    result = services.sync_server(remote)
    assert not result.ok and "asks for authorization" in result.error
    remote.refresh_from_db()
    assert remote.needs_authorization
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[remote.pk])).content.decode()
    assert 'data-testid="needs-sign-in"' in page and 'data-testid="oauth-connect"' in page
    assert '<pre class="mcp-error">' not in page  # the prompt replaces the error text
    client.force_login(viewer_user)
    page = client.get(reverse("mcp_servers:server_detail", args=[remote.pk])).content.decode()
    assert "an admin connects it" in page and 'data-testid="oauth-connect"' not in page


def test_connect_runs_code_and_pkce_through_our_callback_then_sync_and_calls_use_the_token(admin_client, remote, protected):
    location = start_connect(admin_client, remote)
    query = parse_qs(urlsplit(location).query)
    assert location.startswith(f"{protected.base}/authorize?")
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    assert query["redirect_uri"] == ["http://testserver" + reverse("mcp_servers:oauth_callback")]
    assert query["resource"] == [protected.url] and query["scope"] == ["mcp"]
    grant = McpServerAuth.objects.get(server=remote)
    assert grant.pending and grant.pending_state != query["state"][0]  # only its digest is kept
    assert 'data-testid="oauth-pending"' in admin_client.get(reverse("mcp_servers:server_oauth", args=[remote.pk])).content.decode()

    response = come_back(admin_client, authorize(location))
    assert response.status_code == 302
    grant = wait_until(lambda: McpServerAuth.objects.filter(server=remote, connected_at__isnull=False).first(), "connected", timeout=30)
    assert protected.auth.counts["register"] >= 1 and protected.auth.counts["code"] >= 1
    tokens = stored_tokens(remote)
    assert tokens["access_token"] in protected.auth.access_tokens and grant.expires_at > timezone.now()
    # Sealed: neither the tokens nor the registered client's secret are in the row as text.
    raw = McpServerAuth.objects.filter(server=remote).values_list("tokens_sealed", "client_info_sealed").get()
    assert tokens["access_token"] not in "".join(raw) and tokens["refresh_token"] not in "".join(raw)
    assert not any(client["secret"] in "".join(raw) for client in protected.auth.clients.values())

    before = protected.auth.counts["mcp_ok"]
    remote.refresh_from_db()
    result = services.sync_server(remote)
    assert result.ok, result.error
    assert remote.tools.filter(name="mcp__remote__add").exists()
    answer = call_server_tool(ServerConfig.from_server(remote), "add", {"a": 2, "b": 3})
    assert not answer.is_error and text_of(answer) == "5.0"
    # The conversation loop's and the gateway's way: the per-process session pool.
    outcome, _ = call_registered_tool(remote, "mcp__remote__add", {"a": 4, "b": 4})
    assert not outcome.is_error and outcome.content[0]["text"] == "8.0"
    assert protected.auth.counts["mcp_ok"] > before


def test_an_expired_token_is_refreshed_and_stored_again(admin_client, remote, protected):
    connect(admin_client, remote)
    old = stored_tokens(remote)
    protected.auth.expire_access_tokens()
    McpServerAuth.objects.filter(server=remote).update(expires_at=timezone.now())
    refreshes = protected.auth.counts["refresh"]
    remote.refresh_from_db()
    answer = call_server_tool(ServerConfig.from_server(remote), "add", {"a": 1, "b": 1})
    assert not answer.is_error and text_of(answer) == "2.0"
    assert protected.auth.counts["refresh"] == refreshes + 1
    new = stored_tokens(remote)
    assert new["access_token"] != old["access_token"] and new["refresh_token"] != old["refresh_token"]
    assert McpServerAuth.objects.get(server=remote).expires_at > timezone.now()


def test_a_grant_that_stops_working_says_connect_again_and_disconnect_forgets_it(admin_client, remote, protected):
    connect(admin_client, remote)
    protected.auth.access_tokens.clear()
    protected.auth.refresh_tokens.clear()  # revoked at the authorization server
    remote.refresh_from_db()
    with pytest.raises(McpAuthorizationNeeded, match="presses Connect"):
        call_server_tool(ServerConfig.from_server(remote), "add", {"a": 1, "b": 1})
    response = admin_client.post(reverse("mcp_servers:server_oauth_disconnect", args=[remote.pk]))
    assert response.status_code == 302
    grant = McpServerAuth.objects.get(server=remote)
    assert not grant.connected and not grant.client_info_sealed and grant.required
    remote.refresh_from_db()
    assert ServerConfig.from_server(remote).oauth == ()


def test_a_forged_or_replayed_answer_is_refused_with_a_clear_page(admin_client, remote, protected):
    forged = admin_client.get(reverse("mcp_servers:oauth_callback") + "?code=abc&state=forged-state")
    assert forged.status_code == 400 and "matches no Connect in progress" in forged.content.decode()
    missing = admin_client.get(reverse("mcp_servers:oauth_callback"))
    assert missing.status_code == 400 and "Press Connect" in missing.content.decode()

    callback = authorize(start_connect(admin_client, remote))
    assert come_back(admin_client, callback).status_code == 302
    wait_until(lambda: McpServerAuth.objects.filter(server=remote, connected_at__isnull=False).exists(), "connected", timeout=30)
    replayed = come_back(admin_client, callback)  # the same answer again: its state was used
    assert replayed.status_code == 400 and "used already" in replayed.content.decode()


def test_a_code_our_verifier_does_not_match_is_refused_by_the_token_endpoint_and_said(admin_client, remote, protected):
    location = start_connect(admin_client, remote)
    ours = parse_qs(urlsplit(location).query)
    # Another authorization of the same client, with a challenge our flow's verifier does not match.
    other = location.replace(ours["code_challenge"][0], "x" * 43)
    their_code = parse_qs(urlsplit(authorize(other)).query)["code"][0]
    refused = protected.auth.counts["token_refused"]
    response = admin_client.get(reverse("mcp_servers:oauth_callback") + f"?code={their_code}&state={ours['state'][0]}&iss={protected.base}")
    assert response.status_code == 302
    grant = wait_until(lambda: McpServerAuth.objects.filter(server=remote).exclude(last_error="").first(), "the failure", timeout=30)
    assert "PKCE verification failed" in grant.last_error and not grant.connected
    assert protected.auth.counts["token_refused"] == refused + 1
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[remote.pk])).content.decode()
    assert 'data-testid="oauth-error"' in page and 'data-testid="oauth-connect"' in page


def test_the_person_declining_ends_the_connect_with_the_reason(admin_client, remote):
    state = parse_qs(urlsplit(start_connect(admin_client, remote)).query)["state"][0]
    response = admin_client.get(reverse("mcp_servers:oauth_callback") + f"?error=access_denied&error_description=No+thanks&state={state}")
    assert response.status_code == 302
    grant = wait_until(lambda: McpServerAuth.objects.filter(server=remote, pending_state="").exclude(last_error="").first(),
                       "the refusal", timeout=10)
    assert "did not grant access (access_denied: No thanks)" in grant.last_error


def test_no_credential_reaches_a_page_log_or_export(admin_client, viewer_user, client, remote, protected, caplog):
    caplog.set_level(logging.DEBUG)
    pre_id, pre_secret = protected.auth.add_client("http://testserver" + reverse("mcp_servers:oauth_callback"))
    registrations = protected.auth.counts["register"]
    location = start_connect(admin_client, remote, client_id=pre_id, client_secret=pre_secret)
    assert parse_qs(urlsplit(location).query)["client_id"] == [pre_id]  # the admin's client, not a new registration
    come_back(admin_client, authorize(location))
    wait_until(lambda: McpServerAuth.objects.filter(server=remote, connected_at__isnull=False).exists(), "connected", timeout=30)
    assert protected.auth.counts["register"] == registrations
    assert pre_secret not in "".join(McpServerAuth.objects.filter(server=remote).values_list("client_secret_sealed", flat=True))
    tokens = stored_tokens(remote)
    secrets = [tokens["access_token"], tokens["refresh_token"], pre_secret]
    remote.refresh_from_db()
    services.sync_server(remote)

    admin_pages = [admin_client.get(reverse(name, args=[remote.pk])).content.decode()
                   for name in ("mcp_servers:server_detail", "mcp_servers:server_oauth", "mcp_servers:server_export")]
    assert "Connected as <strong" in admin_pages[0] and "an account at 127.0.0.1" in admin_pages[0]
    assert 'value="********"' in admin_pages[1] or "secret ********" in admin_pages[1]
    client.force_login(viewer_user)
    viewer_pages = [client.get(reverse(name, args=[remote.pk])).content.decode()
                    for name in ("mcp_servers:server_detail", "mcp_servers:server_oauth")]
    viewer_pages.append(client.get(reverse("mcp_servers:server_list")).content.decode())
    assert "Connected." in viewer_pages[0] and "an account at" not in viewer_pages[0] and pre_id not in viewer_pages[0]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in secrets:
        for text in [*admin_pages, *viewer_pages, logged]:
            assert secret not in text


def test_the_client_id_metadata_document_names_our_client_and_callback(client, settings):
    settings.MCP_OAUTH_CLIENT_METADATA_URL = "https://playground.example.com/mcp/oauth/client-metadata.json"
    document = client.get(reverse("mcp_servers:oauth_client_metadata")).json()
    assert document["client_id"] == settings.MCP_OAUTH_CLIENT_METADATA_URL
    assert document["redirect_uris"] == ["http://testserver" + reverse("mcp_servers:oauth_callback")]
    assert document["token_endpoint_auth_method"] == "none" and "client_secret" not in document


def test_a_token_another_process_refreshed_is_taken_from_storage_not_refreshed_again(admin_client, remote, protected):
    """A pooled session's provider holds its tokens in memory; when they expire it reads the stored
    ones first: another process may have refreshed (and the server rotated the refresh token)."""
    protected.auth.access_seconds = 2
    try:
        connect(admin_client, remote)
    finally:
        protected.auth.access_seconds = 3600
    remote.refresh_from_db()
    first, _ = call_registered_tool(remote, "mcp__remote__add", {"a": 1, "b": 2})  # opens the pooled session
    assert not first.is_error, first.content
    expires_at = McpServerAuth.objects.get(server=remote).expires_at
    wait_until(lambda: timezone.now() > expires_at, "the access token to expire", timeout=10)
    # Another process's call (a connection of its own) refreshes it; the server rotates the refresh token.
    refreshes = protected.auth.counts["refresh"]
    assert not call_server_tool(ServerConfig.from_server(remote), "add", {"a": 1, "b": 1}).is_error
    assert protected.auth.counts["refresh"] == refreshes + 1
    # The pooled session's provider held the expired token and the rotated-away refresh token.
    again, _ = call_registered_tool(remote, "mcp__remote__add", {"a": 2, "b": 2})
    assert not again.is_error and again.content[0]["text"] == "4.0", again.content
    assert protected.auth.counts["refresh"] == refreshes + 1


def test_sealed_values_need_the_key_and_a_changed_key_reads_as_nothing(settings):
    from playground.mcp_servers.vault import seal

    settings.MCP_SECRETS_KEY = "first passphrase"
    sealed = seal("at-secret-token-value")
    assert "at-secret-token-value" not in sealed and unseal(sealed) == "at-secret-token-value"
    assert seal("at-secret-token-value") != sealed  # a fresh IV each time: equal values do not show
    settings.MCP_SECRETS_KEY = "another passphrase"
    assert unseal(sealed) == ""  # the grant then reads as not connected: Connect again
    assert seal("") == "" and unseal("") == ""
