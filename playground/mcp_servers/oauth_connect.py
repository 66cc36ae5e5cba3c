"""Connect: an admin signs the playground in to a remote server's authorization server.

The `mcp` SDK's `OAuthClientProvider` runs the whole flow inside one HTTP request to the server (the
401 that starts it, discovery, registration, the authorization code + PKCE exchange, the retried
request). It asks us twice: `redirect_handler(url)` — send the person there — and
`callback_handler()` — wait until they come back with a code. Waiting holds nothing:

1. `begin()` (the Connect button's view) starts the connection as a task on the process's event
   loop (`per_process.portal()`), waits only until the SDK hands over the authorization URL, and
   the view redirects the browser there. The `state` in that URL is saved as a digest on the
   server's `McpServerAuth` row (`pending_state`).
2. The task's callback handler joins the channel-layer group `callback_group(digest)` and waits
   there — a coroutine, no thread, no worker — for at most MCP_OAUTH_WAIT_SECONDS.
3. The authorization server sends the browser to our callback view (`callback()`), in any web
   process. A `state` that matches no Connect in progress is refused with a clear page; a matching
   one's code is saved on the row (sealed) and the group told. The task reads it, clears the
   pending state (a code works once), and the SDK exchanges it with the PKCE verifier it kept.
4. The tokens land in `GrantStorage` (sealed); the server is marked connected and a sync queued.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from mcp.shared.auth import AuthorizationCodeResult

from playground.mcp_servers import oauth, services
from playground.mcp_servers.connection import McpConnectionError, open_connection
from playground.mcp_servers.models import McpServer, McpServerAuth
from playground.mcp_servers.oauth import AuthorizationNeeded, GrantStorage, StoredGrantProvider, in_thread
from playground.mcp_servers.secrets import scrub
from playground.mcp_servers.server_log import sink_for
from playground.mcp_servers.transports import ServerConfig
from playground.mcp_servers.vault import digest, seal, unseal
from playground.per_process import portal
from playground.realtime import listening_to_group, send_to_group

logger = logging.getLogger(__name__)

CALLBACK_MESSAGE_TYPE = "mcp.oauth.callback"
# `McpServerAuth.pending_state` while the code is being exchanged (the state's digest is gone by then).
EXCHANGING = "exchanging"
# How long the Connect view waits for the SDK to reach the authorization URL (discovery and
# registration are a few requests to the servers).
BEGIN_SECONDS = 30.0


def callback_group(state_digest: str) -> str:
    return f"mcp-oauth-{state_digest[:40]}"


@dataclass
class ConnectStart:
    """What the Connect view does next: send the browser to `url`, or show `message`."""

    url: str = ""
    message: str = ""
    ok: bool = False


class SignInFailed(AuthorizationNeeded):
    """The person did not come back with a code (declined, replaced, expired): the text is for the page."""


def save_client(server: McpServer, *, client_id: str, client_secret: str | None) -> McpServerAuth:
    """An admin's pre-registered client (blank id: dynamic registration or CIMD). A secret of None
    keeps the stored one (the form showed it masked); "" forgets it."""
    grant, _ = McpServerAuth.objects.get_or_create(server=server)
    client_id = client_id.strip()[:500]
    if client_id != grant.client_id:
        grant.client_info_sealed = ""  # another client: what was registered before no longer applies
    grant.client_id = client_id
    if client_secret is not None:
        grant.client_secret_sealed = seal(client_secret.strip())
    grant.save()
    return grant


def disconnect(server: McpServer) -> None:
    """"Disconnect": forget the grant's tokens, registered client and any Connect in progress."""
    oauth.forget_grant(server.pk)


def begin(server: McpServer, *, redirect_uri: str, user_id: int | None) -> ConnectStart:
    """Start a Connect (see the module's text); returns once the browser has somewhere to go."""
    grant, _ = McpServerAuth.objects.get_or_create(server=server)
    replaced = grant.pending_state
    McpServerAuth.objects.filter(pk=grant.pk).update(
        redirect_uri=redirect_uri[:500], last_error="", pending_state="", pending_since=None, pending_code_sealed="")
    if replaced and replaced != EXCHANGING:
        _wake(replaced)  # a Connect still waiting ends now (it finds its state gone), not after its timeout
    # Without its stored grant: the flow below is the one that signs in.
    config = dataclasses.replace(ServerConfig.from_server(server), oauth=())
    started: concurrent.futures.Future[ConnectStart] = concurrent.futures.Future()
    portal().submit(_connect(server.pk, server.name, config, redirect_uri, user_id, started))
    try:
        return started.result(BEGIN_SECONDS)
    except concurrent.futures.TimeoutError:
        return ConnectStart(message=f"the server or its authorization server did not answer within {BEGIN_SECONDS:g} s")


async def _connect(server_id: int, name: str, config: ServerConfig, redirect_uri: str, user_id: int | None,
                   started: concurrent.futures.Future[ConnectStart]) -> None:
    state_digest = ""
    state = ""

    async def send_person(url: str) -> None:
        nonlocal state, state_digest
        state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
        state_digest = digest(state)
        await in_thread(_mark_pending, server_id, state_digest)
        if not started.done():
            started.set_result(ConnectStart(url=url))

    async def wait_for_code() -> AuthorizationCodeResult:
        code, iss = await _wait_for_code(server_id, state_digest)
        return AuthorizationCodeResult(code=code, state=state, iss=iss or None)

    provider = StoredGrantProvider(
        server_url=config.url, client_metadata=oauth.client_metadata(redirect_uri), storage=GrantStorage(server_id, config.url),
        redirect_handler=send_person, callback_handler=wait_for_code, client_metadata_url=oauth.client_metadata_url(),
    )
    try:
        # The request that started the flow waits for the person: its bound is theirs, plus the exchange.
        async with open_connection(config, auth=provider, connect_timeout=settings.MCP_OAUTH_WAIT_SECONDS + 30,
                                   log_sink=sink_for(server_id, config)):
            pass
    except BaseException as exc:
        message = _failure_text(exc)
        with anyio.move_on_after(10, shield=True):
            secrets = await in_thread(oauth.grant_secrets, server_id)
            message = scrub(message, secrets)
            await in_thread(_mark_failed, server_id, message, state_digest)
        if not started.done():
            started.set_result(ConnectStart(message=message))
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return
    await in_thread(_mark_connected, server_id, user_id)
    if not started.done():  # its stored tokens (or none at all) were enough: no sign-in needed
        started.set_result(ConnectStart(ok=True, message=f"{name} answered without a new sign-in."))


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, McpConnectionError):  # a sign-in that failed arrives as McpAuthorizationNeeded, its reason said
        return str(exc)
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "the Connect was stopped (the web process shut down?): press Connect again"
    return f"{exc.__class__.__name__}: {exc}"


async def _wait_for_code(server_id: int, state_digest: str) -> tuple[str, str]:
    """The code the callback saved for this Connect: join the group first, then look, then wait."""
    async with listening_to_group(callback_group(state_digest)) as receive:
        with anyio.move_on_after(settings.MCP_OAUTH_WAIT_SECONDS):
            while True:
                taken = await in_thread(_take_code, server_id, state_digest)
                if taken is not None:
                    return taken
                await receive()
    await in_thread(_clear_pending, server_id, state_digest)
    raise SignInFailed(f"nobody came back from the authorization server within {settings.MCP_OAUTH_WAIT_SECONDS:g} s: "
                       "press Connect again")


def _mark_pending(server_id: int, state_digest: str) -> None:
    McpServerAuth.objects.filter(server_id=server_id).update(
        pending_state=state_digest, pending_since=timezone.now(), pending_code_sealed="", pending_iss="", last_error="")


def _take_code(server_id: int, state_digest: str) -> tuple[str, str] | None:
    """(code, iss) once the callback brought them — the pending state cleared with it, so the same
    answer cannot be used twice; None while waiting. A Connect replaced, cancelled or refused at
    the authorization server raises with the reason."""
    with transaction.atomic():
        grant = McpServerAuth.objects.select_for_update().filter(server_id=server_id).first()
        if grant is None or grant.pending_state != state_digest:
            raise SignInFailed((grant.last_error if grant is not None else "") or
                               "the Connect was replaced by another one or the server's grant was removed")
        code = unseal(grant.pending_code_sealed)
        if not code:
            return None
        iss = grant.pending_iss
        # The digest goes (a replayed answer finds nothing); the page keeps polling until it is done.
        grant.pending_state, grant.pending_code_sealed, grant.pending_iss = EXCHANGING, "", ""
        grant.save(update_fields=["pending_state", "pending_since", "pending_code_sealed", "pending_iss", "updated_at"])
        return code, iss


def _clear_pending(server_id: int, state_digest: str) -> None:
    McpServerAuth.objects.filter(server_id=server_id, pending_state=state_digest).update(
        pending_state="", pending_since=None, pending_code_sealed="", pending_iss="")


def _mark_failed(server_id: int, message: str, state_digest: str) -> None:
    """The Connect failed: say why on the card, unless another Connect has begun since."""
    McpServerAuth.objects.filter(server_id=server_id, pending_state__in=["", EXCHANGING, state_digest]).update(
        last_error=message[:2000], pending_state="", pending_since=None, pending_code_sealed="", pending_iss="")


def _mark_connected(server_id: int, user_id: int | None) -> None:
    with transaction.atomic():
        grant = McpServerAuth.objects.select_for_update().filter(server_id=server_id).first()
        if grant is None:
            return
        grant.pending_state, grant.pending_since = "", None
        if not grant.connected:  # the server let us in without asking: it needs no grant
            grant.required = False
        else:
            grant.connected_at, grant.connected_by_id, grant.last_error = timezone.now(), user_id, ""
            grant.required = True
        grant.save(update_fields=["pending_state", "pending_since", "connected_at", "connected_by", "last_error",
                                  "required", "updated_at"])
        server = McpServer.objects.get(pk=server_id)
        if server.enabled:
            services.request_sync(server)


@dataclass
class CallbackOutcome:
    server: McpServer | None
    message: str
    ok: bool


def callback(*, state: str, code: str, iss: str, error: str, error_description: str) -> CallbackOutcome:
    """The authorization server's answer, as the browser brought it back. Never raises for bad input:
    an unknown or used `state` (a replayed or forged answer, or an old tab) is refused with a
    message; an error (the person declined) ends the Connect with it; a code goes to the waiting flow."""
    state_digest = digest(state) if state else ""
    with transaction.atomic():
        grant = (McpServerAuth.objects.select_for_update().select_related("server").filter(pending_state=state_digest).first()
                 if state_digest else None)
        if grant is None:
            return CallbackOutcome(None, (
                "This sign-in answer matches no Connect in progress: it was used already, it expired, or it was not "
                "started here. Press Connect on the server's page to start again."), ok=False)
        if oauth.expired_pending(grant):
            _expire(grant, "the sign-in took longer than MCP_OAUTH_WAIT_SECONDS: press Connect again")
            return CallbackOutcome(grant.server, grant.last_error, ok=False)
        if error or not code:
            said = scrub(f"{error or 'no code'}" + (f": {error_description}" if error_description else ""))[:500]
            _expire(grant, f"the authorization server did not grant access ({said})")
            outcome = CallbackOutcome(grant.server, grant.last_error, ok=False)
        else:
            grant.pending_code_sealed, grant.pending_iss = seal(code[:4000]), iss[:500]
            grant.save(update_fields=["pending_code_sealed", "pending_iss", "updated_at"])
            outcome = CallbackOutcome(grant.server, "Signed in at the authorization server; finishing the connection.", ok=True)
    _wake(state_digest)
    return outcome


def _wake(state_digest: str) -> None:
    """Tell the Connect waiting on this state to look at its row again."""
    try:
        send_to_group(callback_group(state_digest), {"type": CALLBACK_MESSAGE_TYPE})
    except Exception:  # the flow then waits out MCP_OAUTH_WAIT_SECONDS and says so
        logger.warning("could not wake the Connect flow waiting on the channel layer", exc_info=True)


def _expire(grant: McpServerAuth, message: str) -> None:
    grant.pending_state, grant.pending_since, grant.pending_code_sealed, grant.pending_iss = "", None, "", ""
    grant.last_error = message
    grant.save(update_fields=["pending_state", "pending_since", "pending_code_sealed", "pending_iss", "last_error", "updated_at"])
