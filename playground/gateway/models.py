"""Access tokens for a profile's MCP endpoint, the MCP sessions clients open on it, and what
happened in each session (events with a per-session sequence, saved before anyone is told)."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from playground.storage_fields import StorableCharField, StorableJSONField


class GatewayToken(models.Model):
    """A bearer token for one profile's endpoint. Only its SHA-256 is kept: the token itself is
    shown once, when it is created."""

    profile = models.ForeignKey("registry.AgentProfile", on_delete=models.CASCADE, related_name="gateway_tokens")
    name = StorableCharField(max_length=100, help_text="Who or what uses it, e.g. “Claude Desktop on alice's laptop”.")
    token_hash = StorableCharField(max_length=64, unique=True)
    # The first characters of the token, so a person can tell tokens apart without the secret.
    prefix = StorableCharField(max_length=16)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class GatewaySession(models.Model):
    """One MCP session (Mcp-Session-Id) on a profile's endpoint, with the tools its searches
    discovered: they stay in that session's tools/list for as long as the session lives. For a
    stateless (2026-07-28) client, the row stands for its run of requests (`stateless`)."""

    session_id = StorableCharField(max_length=100, unique=True)
    profile = models.ForeignKey("registry.AgentProfile", on_delete=models.CASCADE, related_name="gateway_sessions")
    token = models.ForeignKey(GatewayToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions")
    client_name = StorableCharField(max_length=200, blank=True)
    client_version = StorableCharField(max_length=100, blank=True)
    protocol_version = StorableCharField(max_length=40, blank=True)
    discovered_tools = StorableJSONField(default=list, blank=True)
    # The client's initialize params (capabilities, clientInfo) and the version the handshake
    # settled on: with them another web process can take the session over after a reconnect
    # (manager.py), without a new handshake.
    initialize_params = StorableJSONField(default=dict, blank=True)
    negotiated_version = StorableCharField(max_length=40, blank=True)
    # A 2026-07-28 client has no session: its requests, per token and client name, are gathered in
    # one row while they keep coming (GATEWAY_SESSION_IDLE_SECONDS), which plays the session's part.
    stateless = models.BooleanField(default=False)
    closed_at = models.DateTimeField(null=True, blank=True)
    next_sequence = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.client_name or 'unknown client'} on {self.profile_id} ({self.session_id[:8]})"


class GatewayEvent(models.Model):
    """One thing that happened in a session: tools listed, a search, a call."""

    class Type(models.TextChoices):
        SESSION_STARTED = "session_started", "Session started"
        TOOLS_LISTED = "tools_listed", "tools/list"
        TOOL_SEARCH = "tool_search", "ToolSearch"
        TOOL_CALL = "tool_call", "Tool call"
        PERMISSION_ASKED = "permission_asked", "Permission asked"
        PERMISSION_ANSWERED = "permission_answered", "Permission answered"
        RESOURCE_READ = "resource_read", "resources/read"
        PROMPT_GOT = "prompt_got", "prompts/get"
        SESSION_CLOSED = "session_closed", "Session closed"

    session = models.ForeignKey(GatewaySession, on_delete=models.CASCADE, related_name="events")
    sequence = models.PositiveIntegerField()
    type = StorableCharField(max_length=30, choices=Type.choices)
    payload = StorableJSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "sequence"]
        constraints = [models.UniqueConstraint(fields=["session", "sequence"], name="unique_gateway_event_sequence")]


class GatewayDiscovery(models.Model):
    """A tool one client's searches found, remembered across its sessions: a client that opens a
    session per request (the MCP Inspector's command line) searches in one session and calls in the
    next. Kept per token and client name (from `initialize`) for GATEWAY_DISCOVERY_TTL_SECONDS after
    the last search that found it; a new session of that client starts with these tools discovered.
    Whether one may still be called is decided at call time, as for any discovered tool."""

    token = models.ForeignKey(GatewayToken, on_delete=models.CASCADE, related_name="discoveries")
    client_name = StorableCharField(max_length=200, blank=True)
    tool_name = StorableCharField(max_length=200)
    found_at = models.DateTimeField()

    class Meta:
        ordering = ["found_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["token", "client_name", "tool_name"],
                                               name="unique_gateway_discovery")]


class GatewayPrompt(models.Model):
    """A call under an `ask` rule, waiting for a person's answer on the session's page. The MCP
    request stays open while it waits (GATEWAY_PERMISSION_TIMEOUT_SECONDS at most)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for an answer"
        ALLOWED = "allowed", "Allowed"
        DENIED = "denied", "Denied"
        TIMEOUT = "timeout", "Nobody answered in time"

    session = models.ForeignKey(GatewaySession, on_delete=models.CASCADE, related_name="prompts")
    tool_name = StorableCharField(max_length=64)
    arguments = StorableJSONField(default=dict, blank=True)
    reason = StorableCharField(max_length=300, blank=True)
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
