"""OAuth to remote MCP servers: the grant a connection uses, through the `mcp` SDK's own client auth.

The SDK's `OAuthClientProvider` (an httpx auth) does the protocol: on a 401 it reads the protected
resource metadata the `WWW-Authenticate` header points to, the authorization server's metadata,
registers a client (dynamic registration, or our client ID metadata document when
MCP_OAUTH_CLIENT_METADATA_URL is set and the server supports it) unless an admin entered a
pre-registered one, runs authorization code + PKCE, and refreshes an expired access token with the
refresh token. What it keeps goes through `GrantStorage` into the server's `McpServerAuth` row,
sealed (`vault`).

Here: the storage, the provider every ordinary connection uses (`provider_for`: sync, calls, the
conversation loop and the gateway — it refreshes, and never sends a person anywhere: a grant that
no longer works raises `AuthorizationNeeded`, and the page offers Connect), and the shown forms.
The interactive Connect is `oauth_connect.py`.
"""
from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from playground.mcp_servers.models import McpServerAuth
from playground.mcp_servers.vault import seal, unseal

T = TypeVar("T")
CLIENT_NAME = "ToolSearch Playground"


class AuthorizationNeeded(Exception):
    """The server wants a sign-in the connection cannot do by itself: the message is for the page."""


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """Database work from the event loop: in a worker thread, its connection given back after."""

    def run() -> T:
        close_old_connections()
        try:
            return function(*args)
        finally:
            connections.close_all()

    return await anyio.to_thread.run_sync(run)


def client_metadata(redirect_uri: str) -> OAuthClientMetadata:
    """What the playground registers as (a confidential web client: it keeps a secret sealed)."""
    return OAuthClientMetadata(
        redirect_uris=[redirect_uri], client_name=CLIENT_NAME, grant_types=["authorization_code", "refresh_token"],
        response_types=["code"], token_endpoint_auth_method="client_secret_post", application_type="web",
    )


def client_metadata_url() -> str | None:
    return (settings.MCP_OAUTH_CLIENT_METADATA_URL or "").strip() or None


def account_of(tokens: OAuthToken, issuer: str) -> str:
    """Who the grant acts as, for "connected as …": a JWT access token's own claim when it is one
    (read, not verified: it is a label), else the authorization server's host. Never a credential."""
    parts = tokens.access_token.split(".")
    if len(parts) == 3:
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, TypeError):
            claims = {}
        if isinstance(claims, dict):
            for key in ("email", "preferred_username", "name", "sub"):
                if isinstance(claims.get(key), str) and claims[key].strip():
                    return claims[key].strip()[:120]
    host = urlsplit(issuer).hostname or ""
    return f"an account at {host}" if host else "an account"


class GrantStorage:
    """The SDK's `TokenStorage`, kept in a server's `McpServerAuth` row (sealed)."""

    def __init__(self, server_id: int, server_url: str = "") -> None:
        self.server_id = server_id
        self.server_url = server_url  # names the account when the authorization server is not known

    def _grant(self) -> McpServerAuth | None:
        return McpServerAuth.objects.filter(server_id=self.server_id).first()

    async def get_tokens(self) -> OAuthToken | None:
        grant = await in_thread(self._grant)
        text = unseal(grant.tokens_sealed) if grant is not None else ""
        return OAuthToken.model_validate_json(text) if text else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        def save() -> None:
            grant, _ = McpServerAuth.objects.get_or_create(server_id=self.server_id)
            grant.tokens_sealed = seal(tokens.model_dump_json(exclude_none=True))
            grant.expires_at = timezone.now() + timedelta(seconds=int(tokens.expires_in)) if tokens.expires_in is not None else None
            grant.scope = (tokens.scope or "")[:500]
            grant.account = account_of(tokens, grant.issuer or self.server_url)
            grant.save(update_fields=["tokens_sealed", "expires_at", "scope", "account", "updated_at"])

        await in_thread(save)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        grant = await in_thread(self._grant)
        if grant is None:
            return None
        text = unseal(grant.client_info_sealed)
        if text:
            return OAuthClientInformationFull.model_validate_json(text)
        if grant.client_id:  # pre-registered by an admin: no registration, its secret if it has one
            secret = unseal(grant.client_secret_sealed) or None
            return OAuthClientInformationFull(
                client_id=grant.client_id, client_secret=secret, redirect_uris=[grant.redirect_uri] if grant.redirect_uri else None,
                token_endpoint_auth_method="client_secret_post" if secret else "none",
                grant_types=["authorization_code", "refresh_token"],
            )
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        def save() -> None:
            grant, _ = McpServerAuth.objects.get_or_create(server_id=self.server_id)
            grant.client_info_sealed = seal(client_info.model_dump_json(exclude_none=True))
            grant.issuer = str(client_info.issuer or grant.issuer or "")[:500]
            grant.save(update_fields=["client_info_sealed", "issuer", "updated_at"])

        await in_thread(save)

    async def expiry(self) -> float | None:
        grant = await in_thread(self._grant)
        return grant.expires_at.timestamp() if grant is not None and grant.expires_at is not None else None


class StoredGrantProvider(OAuthClientProvider):
    """The SDK's provider, told when the stored access token expires. The SDK learns an expiry only
    from a token response it handled itself; a token loaded from storage would otherwise count as
    valid forever, and once expired the server's 401 would start a new sign-in instead of the
    refresh the refresh token allows."""

    # What ended the last flow: the streamable HTTP client logs an exception of a request's POST and
    # closes the connection, so the connection reads the reason here (connection._authorization_needed).
    failure: BaseException | None = None

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, GrantStorage):
            self.context.token_expiry_time = await storage.expiry()

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        storage = self.context.storage
        if self._initialized and not self.context.is_token_valid() and isinstance(storage, GrantStorage):
            # Expired here: another process (a worker, the other web process) may have refreshed it
            # already, and an authorization server that rotates refresh tokens refuses the old one.
            self.context.current_tokens = await storage.get_tokens()
            self.context.token_expiry_time = await storage.expiry()
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as exc:
            self.failure = exc
            raise
        finally:
            await flow.aclose()


async def _no_person_here(url: str) -> None:
    raise AuthorizationNeeded(
        "the server's authorization no longer works (its token was refused and could not be refreshed): "
        "an admin presses Connect on the server's page to sign in again")


async def _no_callback() -> AuthorizationCodeResult:  # never reached: the redirect handler raised
    raise AuthorizationNeeded("no sign-in is possible from here")


def provider_for(server_id: int, url: str, redirect_uri: str) -> StoredGrantProvider:
    """The auth of an ordinary connection to a connected server: stored tokens, refreshed when they
    expire (and stored again); a sign-in it would need raises `AuthorizationNeeded`."""
    return StoredGrantProvider(
        server_url=url, client_metadata=client_metadata(redirect_uri), storage=GrantStorage(server_id, url),
        redirect_handler=_no_person_here, callback_handler=_no_callback, client_metadata_url=client_metadata_url(),
    )


def grant_marker(server: Any) -> tuple[str, str]:
    """What a `ServerConfig` carries of a server's grant: (redirect URI, when it was connected), or
    () when it has none. A new Connect or a Disconnect changes it, so pooled sessions reconnect."""
    if not getattr(server, "pk", None) or getattr(server, "transport", "") not in ("http", "sse"):
        return ()
    grant = server.grant if hasattr(server, "grant") else None
    if grant is None or not grant.connected or grant.connected_at is None:
        return ()
    return (grant.redirect_uri, grant.connected_at.isoformat())


def grant_secrets(server_id: int) -> list[str]:
    """Every credential of a server's grant (for scrubbing error text that may quote one)."""
    grant = McpServerAuth.objects.filter(server_id=server_id).first()
    if grant is None:
        return []
    found: list[str] = [unseal(grant.client_secret_sealed)]
    for sealed in (grant.tokens_sealed, grant.client_info_sealed):
        text = unseal(sealed)
        if text:
            try:
                data = json.loads(text)
            except ValueError:
                continue
            found += [str(data.get(key) or "") for key in ("access_token", "refresh_token", "client_secret")]
    return [value for value in found if len(value) >= 4]


def forget_grant(server_id: int) -> None:
    """Forget a grant's tokens and registered client (Disconnect; a changed URL); an admin's
    pre-registered client id stays, its secret goes."""
    McpServerAuth.objects.filter(server_id=server_id).update(
        tokens_sealed="", expires_at=None, account="", scope="", issuer="", connected_at=None, connected_by=None,
        client_info_sealed="", client_secret_sealed="", pending_state="", pending_since=None,
        pending_code_sealed="", pending_iss="", last_error="", updated_at=timezone.now())


def note_required(server_id: int) -> None:
    """The server answered 401 with WWW-Authenticate: remember it needs a grant (its page offers Connect)."""
    grant, created = McpServerAuth.objects.get_or_create(server_id=server_id, defaults={"required": True})
    if not created and not grant.required:
        McpServerAuth.objects.filter(pk=grant.pk).update(required=True)


def expired_pending(grant: McpServerAuth) -> bool:
    return grant.pending_since is not None and (
        timezone.now() - grant.pending_since).total_seconds() > settings.MCP_OAUTH_WAIT_SECONDS
