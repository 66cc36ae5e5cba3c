from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from playground.mcp_servers import protocol_eras
from playground.mcp_servers.protocol_names import era_label, error_name
from playground.mcp_servers.secrets import command_basename, mask_args, mask_url, scrub_for, viewer_url
from playground.storage_fields import StorableCharField, StorableJSONField, StorableTextField

SERVER_NAME_VALIDATOR = RegexValidator(
    r"^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$",
    "Letters, digits, '-' and single '_' only: the name becomes the mcp__<name>__ prefix.",
)


class McpServer(models.Model):
    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio"
        HTTP = "http", "Streamable HTTP"
        # The 2024-11-05 HTTP+SSE transport, for servers that never moved to streamable HTTP.
        SSE = "sse", "SSE (deprecated)"

    class ProtocolEra(models.TextChoices):
        AUTO = protocol_eras.AUTO, "Auto (server/discover, else the initialize handshake)"
        LEGACY = protocol_eras.LEGACY, "Legacy (initialize handshake, up to 2025-11-25)"
        MODERN_2026_07_28 = protocol_eras.MODERN_2026_07_28, "2026-07-28 only (stateless)"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        CONNECTED = "connected", "Connected"
        FAILED = "failed", "Failed"
        DISABLED = "disabled", "Disabled"

    name = StorableCharField(max_length=40, unique=True, validators=[SERVER_NAME_VALIDATOR])
    transport = StorableCharField(max_length=10, choices=Transport.choices, default=Transport.STDIO)
    # stdio
    command = StorableCharField(max_length=500, blank=True)
    args = StorableJSONField(default=list, blank=True)
    env = StorableJSONField(default=dict, blank=True)
    # streamable HTTP and SSE
    url = models.URLField(max_length=500, blank=True)
    headers = StorableJSONField(default=dict, blank=True)

    # Which MCP protocol era the playground speaks to it (connection.negotiate): the handshake,
    # `server/discover` first with a fallback to the handshake, or a pinned stateless version.
    # The default is protocol_eras.DEFAULT_PROTOCOL_ERA (legacy, and why).
    protocol_era = StorableCharField(max_length=20, choices=ProtocolEra.choices, default=protocol_eras.DEFAULT_PROTOCOL_ERA)
    # What the last connection settled on (an `initialize` answer or a `server/discover` one).
    negotiated_version = StorableCharField(max_length=40, blank=True)

    enabled = models.BooleanField(default=True)
    # Claude Code's per-server `alwaysLoad: true` (.mcp.json): every tool of the server is sent in
    # full, never deferred, whatever its own `_meta` says (the engine reads it as the tool's always_load).
    always_load = models.BooleanField(
        default=False, verbose_name="Always load its tools",
        help_text="Claude Code's alwaysLoad: every tool of this server is sent to the model in full, never deferred behind ToolSearch.",
    )
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    last_error = StorableTextField(blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    # Written by services.sync_server: when the last sync (or attempt) ended and what it found.
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_sync_result = StorableJSONField(default=dict, blank=True)
    sync_warnings = StorableJSONField(default=list, blank=True)
    # Registry tool name → {"original": the server's own tool name, "meta_always_load": bool}; the
    # executor calls the original name (it differs when the server's name had to be sanitised).
    tool_names = StorableJSONField(default=dict, blank=True)
    # A sync handed to the broker that no worker has started yet (cleared by the worker that starts it),
    # and how often it was sent again because the broker lost its task (playground/lost_tasks.py).
    sync_queued_at = models.DateTimeField(null=True, blank=True)
    sync_attempts = models.PositiveSmallIntegerField(default=0)
    # Written every AGENT_HEARTBEAT_SECONDS by the worker running the sync (playground/heartbeat.py):
    # a sync whose heartbeat is older than AGENT_LOST_SECONDS lost its worker and is failed by the sweep.
    sync_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The roots the workbench's session offers this server (`roots/list`): [{"uri": "file:///…", "name": …}].
    roots = StorableJSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # Shown forms of the connection settings and errors: pages and status frames use these, never
    # the raw fields (credentials travel in URLs, arguments and a server's error output). Viewers
    # (and the status frames every viewer gets) see only `viewer_location`; admins the masked forms.
    @property
    def shown_url(self) -> str:
        return mask_url(self.url or "")

    @property
    def is_remote(self) -> bool:
        """Reached over HTTP (streamable HTTP or SSE): a URL, headers, and possibly OAuth."""
        return self.transport in (self.Transport.HTTP, self.Transport.SSE)

    @property
    def grant(self) -> McpServerAuth | None:
        """Its OAuth grant (tokens, client, a Connect in progress), or None if it never needed one."""
        try:
            return self.oauth
        except McpServerAuth.DoesNotExist:
            return None

    @property
    def needs_authorization(self) -> bool:
        """It answered 401 with `WWW-Authenticate` and holds no working grant: its page offers Connect."""
        grant = self.grant
        return grant is not None and grant.required and not grant.connected

    @property
    def viewer_location(self) -> str:
        """The program's file name (stdio) or the URL's scheme and host, the path masked (HTTP)."""
        if self.is_remote:
            return viewer_url(self.url or "")
        return command_basename(self.command or "")

    @property
    def shown_args(self) -> list[str]:
        return mask_args(self.args or [])

    @property
    def shown_last_error(self) -> str:
        return scrub_for(self, self.last_error or "")

    @property
    def shown_sync_error(self) -> str:
        return scrub_for(self, (self.last_sync_result or {}).get("error") or self.last_error or "")

    @property
    def tools_fresh_until(self):
        """Until when the last synced tool list is fresh by the server's own `ttlMs` (2026-07-28
        servers may say), or None: a scheduled sync of every server leaves a fresh one alone."""
        ttl_ms = (self.last_sync_result or {}).get("server_info", {}).get("tools_ttl_ms")
        if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms <= 0 or self.last_synced_at is None:
            return None
        from datetime import timedelta

        return self.last_synced_at + timedelta(milliseconds=min(ttl_ms, 366 * 86_400_000))

    @property
    def tool_prefix(self) -> str:
        return f"mcp__{self.name}__"


class McpLogLine(models.Model):
    """One line of a server's live log: its stderr, a `notifications/message` log, or an event of the
    connection (connected, disconnected, an HTTP session, an error), scrubbed.

    `server_id` is a plain column, not a foreign key: lines are written from the MCP client's
    worker threads on their own database connections, and a key would make those inserts wait on
    a server row another transaction has not committed yet. `server_log.record` keeps the newest
    `server_log.KEEP_LINES` per server; deleting a server removes its lines.
    """

    server_id = models.IntegerField(db_index=True)
    source = StorableCharField(max_length=20)  # "stderr", "log:<level>", "session" or "error" (connection.LogSink)
    text = StorableTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    @property
    def level(self) -> str:
        return self.source.partition(":")[2] or self.source


class McpCallRecord(models.Model):
    """One call made from a server's workbench (tool, resource read, prompt, ping), kept for its history."""

    class Kind(models.TextChoices):
        TOOL = "tool", "tools/call"
        RESOURCE = "resource", "resources/read"
        PROMPT = "prompt", "prompts/get"
        PING = "ping", "ping"
        LIST = "list", "list"
        SUBSCRIBE = "subscribe", "resources/subscribe"
        UNSUBSCRIBE = "unsubscribe", "resources/unsubscribe"
        SET_LEVEL = "setlevel", "logging/setLevel"

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="call_records")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = StorableCharField(max_length=12, choices=Kind.choices)
    name = StorableCharField(max_length=500)
    arguments = StorableJSONField(default=dict, blank=True)
    ok = models.BooleanField(default=True)
    summary = StorableTextField(blank=True)  # the result or the error, scrubbed and cut
    duration_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, indent=2, ensure_ascii=False) if self.arguments else ""


class McpServerRequest(models.Model):
    """A request a server sent the workbench's session mid-call that a person (or a model, on a
    person's word) answers: `sampling/createMessage` and `elicitation/create`. The session's callback waits for the
    answer on the channel layer (`server_requests`), holding no thread; the row is what every
    page shows, live and on reload, and the answer's one source of truth."""

    class Kind(models.TextChoices):
        SAMPLING = "sampling", "sampling/createMessage"
        ELICITATION = "elicitation", "elicitation/create"

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for an answer"
        ANSWERED = "answered", "Answered"
        DECLINED = "declined", "Declined"
        CANCELLED = "cancelled", "Cancelled"
        EXPIRED = "expired", "Expired"

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="server_requests")
    kind = StorableCharField(max_length=20, choices=Kind.choices)
    params = StorableJSONField(default=dict, blank=True)  # what the server asked, as sent (scrubbed)
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # The result sent back to the server (MCP JSON), and who answered: a person, or a model on their word.
    answer = StorableJSONField(default=dict, blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    answered_with = StorableCharField(max_length=200, blank=True)  # "by hand", or the model and its provider
    note = StorableTextField(blank=True)  # why it expired or failed, for the page
    # For a 2026-07-28 server's InputRequiredResult (MRTR): the request it answered and the round
    # ("tools/call book_table, round 1 of at most 5"); empty for a handshake-era server's own request.
    asked_during = StorableCharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING


class McpServerAuth(models.Model):
    """A remote server's OAuth grant (mcp_servers/oauth.py): the client the playground is to its
    authorization server, the tokens it was given, and a Connect in progress.

    Every credential is sealed (`vault.seal`: tokens, client secrets, an authorization code on its
    way to the flow) and never rendered: pages show "connected as …" to admins, "connected" to the
    rest. The OAuth `state` is kept as a digest only. "Disconnect" deletes the grant's credentials.
    """

    server = models.OneToOneField(McpServer, on_delete=models.CASCADE, related_name="oauth")
    # The server answered 401 with WWW-Authenticate: it needs a grant to be used at all.
    required = models.BooleanField(default=False)
    # A client an admin registered with the authorization server beforehand (else: dynamic
    # registration, or the client ID metadata document of MCP_OAUTH_CLIENT_METADATA_URL).
    client_id = StorableCharField(max_length=500, blank=True)
    client_secret_sealed = StorableTextField(blank=True)
    # The SDK's OAuthClientInformationFull as JSON, sealed (a registered client's secret is in it).
    client_info_sealed = StorableTextField(blank=True)
    redirect_uri = StorableCharField(max_length=500, blank=True)
    # The SDK's OAuthToken as JSON, sealed; when its access token expires (the SDK refreshes it then).
    tokens_sealed = StorableTextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    account = StorableCharField(max_length=200, blank=True)  # "connected as …": never a credential
    issuer = StorableCharField(max_length=500, blank=True)
    scope = StorableCharField(max_length=500, blank=True)
    connected_at = models.DateTimeField(null=True, blank=True)
    connected_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # A Connect in progress: the digest of its `state`, when it began, and the code the callback
    # brought back (sealed) for the flow waiting on the channel layer (oauth.py).
    pending_state = StorableCharField(max_length=64, blank=True, db_index=True)
    pending_since = models.DateTimeField(null=True, blank=True)
    pending_code_sealed = StorableTextField(blank=True)
    pending_iss = StorableCharField(max_length=500, blank=True)
    last_error = StorableTextField(blank=True)  # why the last Connect failed, scrubbed
    updated_at = models.DateTimeField(auto_now=True)

    @property
    def connected(self) -> bool:
        return bool(self.tokens_sealed)

    @property
    def pending(self) -> bool:
        """A Connect is in progress (one older than MCP_OAUTH_WAIT_SECONDS lost its web process: not)."""
        if not self.pending_state or self.pending_since is None:
            return False
        from django.utils import timezone

        return (timezone.now() - self.pending_since).total_seconds() <= settings.MCP_OAUTH_WAIT_SECONDS + 60

    @property
    def exchanging(self) -> bool:
        """The person came back with a code; the playground is exchanging it for tokens."""
        return self.pending_state == "exchanging"

    @property
    def has_client_secret(self) -> bool:
        return bool(self.client_secret_sealed)
class McpProtocolMessage(models.Model):
    """One JSON-RPC message of a Protocol view's transcript (protocol_log.py): between our client and
    a server (`scope` "server-<id>") or between a client and the gateway ("gateway-<session pk>").
    A plain scope column, no foreign key: written in batches from the MCP client's worker threads,
    the newest `MCP_PROTOCOL_KEEP_MESSAGES` per scope kept. `body` is the message as JSON, scrubbed
    and cut at `MCP_PROTOCOL_MAX_BODY_CHARS`."""

    scope = StorableCharField(max_length=40)
    sender = StorableCharField(max_length=10)  # "client" or "server"
    kind = StorableCharField(max_length=20)  # request, response, input_required, error, notification
    method = StorableCharField(max_length=100, blank=True)
    rpc_id = StorableCharField(max_length=100, blank=True)
    # The request this message belongs to (every MRTR round of it), and the round: 0 the first.
    group = StorableCharField(max_length=120, blank=True)
    round = models.PositiveSmallIntegerField(default=0)
    protocol_version = StorableCharField(max_length=40, blank=True)
    body = StorableTextField()
    at = models.FloatField()  # when it crossed the wire (epoch seconds)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["scope", "id"], name="mcp_protocol_scope_id")]

    @property
    def parsed(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def error(self) -> dict[str, Any]:
        """code, message and the code's name of an error message (else empty)."""
        error = (self.parsed or {}).get("error") if self.kind == "error" else None
        if not isinstance(error, dict):
            return {}
        code = error.get("code")
        return {"code": code, "message": error.get("message", ""), "name": error_name(code)}

    @property
    def pretty_body(self) -> str:
        parsed = self.parsed
        return json.dumps(parsed, indent=2, ensure_ascii=False) if parsed is not None else self.body

    @property
    def era(self) -> str:
        return era_label(self.protocol_version)
