"""MCP server orchestration: sync a server's tools into the registry, request syncs, demo servers.

`sync_server` is the only writer of MCP tool rows (`registry.Tool` with source=mcp). Status changes
are saved first and pushed to open pages after the transaction commits (`status.broadcast_server_status`).

Tool names. A server's tool `x` becomes `mcp__<server>__x`. When that breaks the Messages API
rule ^[a-zA-Z0-9_-]{1,64}$ (a dot, a space, too long), the name is rewritten deterministically:
every run of other characters becomes `_`, the name is cut to fit, and `_` plus the first 8 hex
digits of SHA-1(original name) is appended — the same server name always gives the same registry
name, and two different originals cannot collide on the cleaned text alone. The sync reports each
rewrite as a warning; `McpServer.tool_names` maps the registry name back to the original for calls.

Local flags. An admin's `enabled`, `search_hint` and `should_defer` survive every sync. `always_load`
starts from the server's `_meta["anthropic/alwaysLoad"]` and follows it on later syncs unless an
admin changed it (the row's value no longer equals what the server said last time).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from playground import lost_tasks
from playground.heartbeat import stale_before, worker_lost_reason
from playground.engine.tools import (
    ALWAYS_LOAD_META_KEY,
    MCP_PREFIX,
    TOOL_NAME_PATTERN,
    Tool as EngineTool,
    ToolDefinitionError,
    mcp_tool_name,
)
from playground.mcp_servers.connection import (
    DEFAULT_CONNECT_TIMEOUT,
    McpAuthorizationNeeded,
    McpCallTimeout,
    McpConnectionError,
    McpToolListing,
    ServerProbe,
    list_server_tools,
)
from playground.mcp_servers import oauth
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.secrets import scrub, scrub_for
from playground.mcp_servers.protocol_log import transcript_for_server
from playground.mcp_servers.server_log import sink_for
from playground.mcp_servers.status import broadcast_server_status
from playground.mcp_servers.transports import ServerConfig
from playground.registry import indexing
from playground.queueing import queue_task
from playground.registry.models import Tool

logger = logging.getLogger(__name__)

DEMO_SERVER_NAME = "demo"
TIME_SERVER_NAME = "time"
DEMO_HTTP_SERVER_NAME = "demo-http"
NAME_HASH_DIGITS = 8
MAX_LISTED_WARNINGS = 20  # past these, one line counts the rest (10,000 warnings are no help)
SYNC_TASK = "mcp_servers.sync_server"  # tasks.py; queued by name (tasks.py imports this module)


@dataclass
class SyncResult:
    server: str
    ok: bool
    status: str
    error: str = ""
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    tool_count: int = 0
    duration_ms: float = 0.0
    server_info: dict[str, str] = field(default_factory=dict)
    partial: str = ""  # the tool limit left some out (bounded_listings)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["duration_ms"] = round(self.duration_ms, 1)
        return data


def registry_tool_name(server_name: str, tool_name: str) -> tuple[str, str | None]:
    """The registry name for a server's tool and, when it had to be rewritten, a warning saying so."""
    candidate = mcp_tool_name(server_name, tool_name)
    if TOOL_NAME_PATTERN.fullmatch(candidate):
        return candidate, None
    prefix = f"{MCP_PREFIX}{server_name}__"
    suffix = hashlib.sha1(tool_name.encode("utf-8")).hexdigest()[:NAME_HASH_DIGITS]
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", tool_name).strip("_") or "tool"
    room = 64 - len(prefix) - 1 - len(suffix)
    name = f"{prefix}{cleaned[:max(room, 1)]}_{suffix}"[:64]
    warning = (
        f"tool {tool_name!r}: {candidate!r} breaks the tool-name rule ^[a-zA-Z0-9_-]{{1,64}}$; "
        f"registered as {name!r}"
    )
    return name, warning


def refresh_tool_loading(server: McpServer) -> int:
    """After the server's alwaysLoad changed: its tool rows' derived fields again (deferred, token
    estimate), saved, so lists filter by the new deferral and the catalog's version moves (every
    process reads the new catalog on its next turn). Returns how many rows were saved."""
    rows = list(Tool.objects.filter(server=server))
    for row in rows:
        row.server = server  # the flag just saved, without a query per row
        row.save(update_fields=())
    return len(rows)


def set_status(server: McpServer, status: str, *, last_error: str | None = None) -> None:
    """Save a status change and push it to open pages once committed."""
    server.status = status
    fields = ["status", "updated_at"]
    if last_error is not None:
        server.last_error = scrub_for(server, last_error)
        fields.append("last_error")
    server.save(update_fields=fields)
    server_id = server.pk
    transaction.on_commit(lambda: broadcast_server_status(server_id))


def note_call_outcome(server: McpServer, error: BaseException | None) -> None:
    """Keep the shown status true after a live call: a server that could not be reached or died
    under the call is Failed (with why); one that answered after such a failure is Connected again.
    A timeout says nothing about the server being gone, so it changes nothing."""
    if error is None:
        if server.status == McpServer.Status.FAILED and server.last_synced_at is not None:
            set_status(server, McpServer.Status.CONNECTED, last_error="")
    elif isinstance(error, McpConnectionError) and not isinstance(error, McpCallTimeout):
        if server.status != McpServer.Status.DISABLED:
            set_status(server, McpServer.Status.FAILED, last_error=str(error))


def sync_server(server: McpServer, *, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> SyncResult:
    """Connect, list the tools, and make the registry rows match. Never raises for server problems."""
    started = time.perf_counter()
    if not server.enabled:
        set_status(server, McpServer.Status.DISABLED)
        return SyncResult(server=server.name, ok=False, status=server.status, error="the server is disabled")

    set_status(server, McpServer.Status.PENDING)
    try:
        config = ServerConfig.from_server(server)
        listings, probe = list_server_tools(config, timeout=timeout, log_sink=sink_for(server.pk, config),
                                            keep=settings.MCP_MAX_TOOLS_PER_SERVER,
                                            transcript=transcript_for_server(server.pk, config))
    except Exception as exc:  # noqa: BLE001 - any failure becomes the server's visible error
        message = str(exc) if isinstance(exc, McpConnectionError) else f"{exc.__class__.__name__}: {exc}"
        if isinstance(exc, McpAuthorizationNeeded):
            oauth.note_required(server.pk)  # its page offers Connect instead of the error
        return _record_failure(server, message, started)

    return apply_listing(server, listings, probe, started=started)


def apply_listing(server: McpServer, listings: list[McpToolListing], probe: ServerProbe, *, started: float | None = None) -> SyncResult:
    """Make the registry rows match a `tools/list` answer and mark the server connected (one transaction)."""
    started = time.perf_counter() if started is None else started
    try:
        with transaction.atomic():
            locked = McpServer.objects.select_for_update().get(pk=server.pk)
            result = _store_tools(locked, listings, offered=probe.tool_count)
            result.server_info = {
                "name": probe.server_name,
                "version": probe.server_version,
                "protocol": probe.protocol_version,
            }
            if probe.tools_ttl_ms is not None:
                result.server_info["tools_ttl_ms"] = probe.tools_ttl_ms
            result.duration_ms = (time.perf_counter() - started) * 1000
            now = timezone.now()
            locked.status = McpServer.Status.CONNECTED
            locked.last_error = ""
            locked.negotiated_version = (probe.protocol_version or "")[:40]
            locked.last_synced_at = now
            locked.last_attempt_at = now
            locked.sync_warnings = result.warnings
            locked.last_sync_result = result.to_dict()
            locked.save(
                update_fields=[
                    "status", "last_error", "negotiated_version", "last_synced_at", "last_attempt_at",
                    "sync_warnings", "last_sync_result", "tool_names", "updated_at",
                ]
            )
            tools_changed = bool(result.added or result.updated or result.removed)
            # A changed tool list is fetched again by open detail pages (each with its viewer's role).
            transaction.on_commit(lambda: broadcast_server_status(locked.pk, tools_changed=tools_changed))
            if result.added or result.updated:
                indexing.request_index_build()  # the new or changed tools' vectors, in the background
    except Exception as exc:
        logger.exception("storing the tools of MCP server %s failed", server.name)
        return _record_failure(server, f"storing the tools failed: {exc.__class__.__name__}: {exc}", started)
    server.refresh_from_db()
    return result


def _record_failure(server: McpServer, message: str, started: float) -> SyncResult:
    # Stored, pushed to every open page and returned to Celery (which logs a task's result): no secrets
    # (a remote server's OAuth tokens and client secret included).
    message = scrub_for(server, message)
    if server.is_remote:
        message = scrub(message, oauth.grant_secrets(server.pk))
    result = SyncResult(
        server=server.name, ok=False, status=McpServer.Status.FAILED, error=message,
        duration_ms=(time.perf_counter() - started) * 1000,
    )
    server.last_attempt_at = timezone.now()
    server.last_sync_result = result.to_dict()
    server.save(update_fields=["last_attempt_at", "last_sync_result", "updated_at"])
    set_status(server, McpServer.Status.FAILED, last_error=message)
    return result


def bounded_listings(listings: list[McpToolListing], offered: int, result: SyncResult) -> list[McpToolListing]:
    """The listings within the limits (MCP_MAX_TOOLS_PER_SERVER, MCP_MAX_TOOL_DESCRIPTION_CHARS,
    MCP_MAX_TOOL_SCHEMA_CHARS): a server cannot flood the registry, its pages or a model's context.
    Past the tool limit the rest are left out (`result.partial` says so); a longer description is
    cut (saying so in the description itself); a tool whose schema is too large is left out."""
    max_tools = settings.MCP_MAX_TOOLS_PER_SERVER
    max_description = settings.MCP_MAX_TOOL_DESCRIPTION_CHARS
    max_schema = settings.MCP_MAX_TOOL_SCHEMA_CHARS
    offered = max(offered, len(listings))
    if offered > max_tools:
        result.partial = (f"Partial listing: the server offers {offered:,} tools; only the first {max_tools:,} are "
                          "stored (MCP_MAX_TOOLS_PER_SERVER).")
    kept: list[McpToolListing] = []
    cut = oversized = 0
    for listing in listings[:max_tools]:
        if len(json.dumps(listing.input_schema, ensure_ascii=False)) > max_schema:
            oversized += 1
            if oversized <= MAX_LISTED_WARNINGS:
                result.warnings.append(f"tool {listing.name[:80]!r} left out: its input schema is over "
                                       f"{max_schema:,} characters (MCP_MAX_TOOL_SCHEMA_CHARS)")
            continue
        if len(listing.description) > max_description:
            cut += 1
            note = f" … [cut: {len(listing.description):,} characters, over MCP_MAX_TOOL_DESCRIPTION_CHARS]"
            listing = McpToolListing(name=listing.name, description=listing.description[:max_description] + note,
                                     input_schema=listing.input_schema, meta=listing.meta)
        kept.append(listing)
    if oversized > MAX_LISTED_WARNINGS:
        result.warnings.append(f"… and {oversized - MAX_LISTED_WARNINGS:,} more tools left out for their schema size")
    if cut:
        result.warnings.append(f"{cut:,} tool description(s) cut to {max_description:,} characters "
                               "(MCP_MAX_TOOL_DESCRIPTION_CHARS)")
    if result.partial:
        result.warnings.insert(0, result.partial)
    return kept


def _store_tools(server: McpServer, listings: list[McpToolListing], *, offered: int = 0) -> SyncResult:
    result = SyncResult(server=server.name, ok=True, status=McpServer.Status.CONNECTED)
    previous_names: dict[str, dict[str, Any]] = server.tool_names or {}
    wanted: dict[str, tuple[EngineTool, str, bool]] = {}
    for listing in bounded_listings(listings, offered, result):
        name, warning = registry_tool_name(server.name, listing.name)
        if warning:
            result.warnings.append(warning)
        if name in wanted:
            result.warnings.append(f"tool {listing.name!r}: duplicate of an earlier tool named {name!r}; skipped")
            continue
        meta_always_load = bool((listing.meta or {}).get(ALWAYS_LOAD_META_KEY, False))
        try:
            engine_tool = EngineTool.from_mcp(server.name, listing.to_mcp_dict(), name=name)
        except ToolDefinitionError as exc:
            result.warnings.append(f"tool {listing.name!r} skipped: {exc}")
            continue
        wanted[name] = (engine_tool, listing.name, meta_always_load)

    existing = {row.name: row for row in Tool.objects.filter(server=server)}
    others = {row.name: row for row in Tool.objects.filter(name__in=list(wanted)).exclude(server=server)}
    new_names: dict[str, dict[str, Any]] = {}
    for name, (engine_tool, original, meta_always_load) in wanted.items():
        new_names[name] = {"original": original, "meta_always_load": meta_always_load}
        schema = dict(engine_tool.input_schema)
        row = existing.pop(name, None)
        if row is None and name in others:
            row = others[name]
            result.warnings.append(f"{name}: an existing {row.get_source_display()} row of that name now belongs to this server")
        if row is None:
            Tool.objects.create(
                name=name,
                description=engine_tool.description,
                input_schema=schema,
                server=server,
                server_name=server.name,
                should_defer=True,  # MCP tools are deferred unless always loaded (engine.is_deferred)
                always_load=meta_always_load,
                enabled=True,
                source=Tool.Source.MCP,
            )
            result.added.append(name)
            continue
        before = (row.description, row.input_schema, row.always_load, row.server_id, row.source, row.server_name)
        row.description = engine_tool.description
        row.input_schema = schema
        row.server = server
        row.server_name = server.name
        row.source = Tool.Source.MCP
        said_before = (previous_names.get(name) or {}).get("meta_always_load")
        if said_before is None or row.always_load == said_before:
            row.always_load = meta_always_load  # the admin did not override it: follow the server
        if before != (row.description, row.input_schema, row.always_load, row.server_id, row.source, row.server_name):
            row.save()
            result.updated.append(name)
        else:
            result.unchanged += 1
    if existing:
        Tool.objects.filter(pk__in=[row.pk for row in existing.values()]).delete()
        result.removed = sorted(existing)
    server.tool_names = new_names
    result.tool_count = len(wanted)
    return result


def request_sync(server: McpServer) -> None:
    """Mark the server pending and queue the Celery sync once this transaction commits."""
    set_status(server, McpServer.Status.PENDING)
    server_id = server.pk
    McpServer.objects.filter(pk=server_id).update(sync_queued_at=timezone.now(), sync_attempts=0, sync_heartbeat_at=None)

    def enqueue() -> None:
        try:
            queue_task(SYNC_TASK, server_id)
        except Exception as exc:
            logger.exception("could not queue the sync of MCP server %s", server_id)
            McpServer.objects.filter(pk=server_id).update(
                status=McpServer.Status.FAILED, sync_queued_at=None,
                last_error=scrub_for(server, f"could not queue the sync (is Redis running?): {exc}"),
            )
            broadcast_server_status(server_id)

    transaction.on_commit(enqueue)


def claim_sync(server_id: int) -> None:
    """The worker starting a sync task: the sync is no longer waiting in the broker, and has a heartbeat."""
    McpServer.objects.filter(pk=server_id, sync_queued_at__isnull=False).update(sync_queued_at=None)
    McpServer.objects.filter(pk=server_id).update(sync_heartbeat_at=timezone.now())


def touch_sync(server_id: int) -> bool:
    """The syncing worker's heartbeat; False once the sync is no longer running (its status left pending)."""
    return bool(McpServer.objects.filter(pk=server_id, status=McpServer.Status.PENDING, sync_heartbeat_at__isnull=False)
                .update(sync_heartbeat_at=timezone.now()))


def end_sync_heartbeat(server_id: int) -> None:
    McpServer.objects.filter(pk=server_id).update(sync_heartbeat_at=None)


# -- syncs whose worker died (playground/heartbeat.py) ----------------------------------------------
def fail_syncs_of_lost_workers() -> int:
    """Fail the syncs whose heartbeat went stale (the sweep, every round); how many."""
    failed = 0
    for server_id in McpServer.objects.filter(status=McpServer.Status.PENDING,
                                              sync_heartbeat_at__lt=stale_before()).values_list("pk", flat=True):
        with transaction.atomic():
            server = McpServer.objects.select_for_update().filter(
                pk=server_id, status=McpServer.Status.PENDING, sync_heartbeat_at__lt=stale_before()).first()
            if server is None:
                continue  # it beat meanwhile, finished, or a new sync was requested
            reason = worker_lost_reason("sync", server.sync_heartbeat_at)
            McpServer.objects.filter(pk=server_id).update(sync_heartbeat_at=None)
            _record_failure(server, f"{reason}. Sync again to retry.", time.perf_counter())
        logger.warning("MCP server %s: the worker syncing it stopped answering; the sync failed", server_id)
        failed += 1
    return failed


LOST_WORKERS = lost_tasks.sweep("MCP syncs whose worker died", fail_syncs_of_lost_workers)


# -- syncs whose task the broker lost (playground/lost_tasks.py) ------------------------------------
def unclaimed_syncs(grace: float) -> dict[int, str]:
    """Servers still pending `grace` seconds after their sync was handed to the broker: id → key."""
    cutoff = timezone.now() - timedelta(seconds=grace)
    rows = McpServer.objects.filter(status=McpServer.Status.PENDING, sync_queued_at__lt=cutoff).values_list("pk", flat=True)
    return {pk: str(pk) for pk in rows}


def requeue_lost_sync(server_id: int, key: str) -> str:
    """Send a pending server's sync again, or fail it once AGENT_QUEUE_ATTEMPTS re-sends are used up.
    Re-checked under the row lock: "" when a worker started it (or another watch re-sent it) meanwhile.
    A sync that runs twice (the lost task turns up after all) does no harm: it is idempotent."""
    cutoff = timezone.now() - timedelta(seconds=lost_tasks.grace_seconds())
    with transaction.atomic():
        server = McpServer.objects.select_for_update().filter(
            pk=server_id, status=McpServer.Status.PENDING, sync_queued_at__lt=cutoff).first()
        if server is None:
            return ""
        if lost_tasks.attempts_used(server.sync_attempts):
            reason = lost_tasks.lost_reason((timezone.now() - server.sync_queued_at).total_seconds(), server.sync_attempts)
            McpServer.objects.filter(pk=server_id).update(sync_queued_at=None)
            _record_failure(server, f"No worker ran this sync: {reason}. Sync again to retry.", time.perf_counter())
            return lost_tasks.FAILED
        McpServer.objects.filter(pk=server_id).update(sync_queued_at=timezone.now(), sync_attempts=server.sync_attempts + 1)
        lost_tasks.send_again(SYNC_TASK, server_id, what=f"the sync of MCP server {server_id}")
    return lost_tasks.REQUEUED


LOST_SYNCS = lost_tasks.watch(lost_tasks.Kind(
    name="MCP server sync", tasks=frozenset({SYNC_TASK}), key_of=lost_tasks.first_arg,
    unclaimed=unclaimed_syncs, lost=requeue_lost_sync))


def demo_server_definitions(http_url: str | None = None) -> list[dict[str, Any]]:
    """The demo servers: our own (stdio) and mcp-server-time (stdio); optionally ours over HTTP.

    For the HTTP variant, start `python -m playground.mcp_servers.demo_server --http --port 8765`
    and pass `http_url="http://127.0.0.1:8765/mcp"` (or set DEMO_MCP_HTTP_URL).
    """
    definitions = [
        {"name": DEMO_SERVER_NAME, "transport": McpServer.Transport.STDIO, "command": sys.executable,
         "args": ["-m", "playground.mcp_servers.demo_server"]},
        {"name": TIME_SERVER_NAME, "transport": McpServer.Transport.STDIO, "command": sys.executable,
         "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
    ]
    if http_url:
        definitions.append({"name": DEMO_HTTP_SERVER_NAME, "transport": McpServer.Transport.HTTP, "url": http_url})
    return definitions


def register_demo_servers(*, http_url: str | None = None) -> list[McpServer]:
    """Create the demo servers' rows (idempotent). A row whose interpreter no longer exists (the
    database outlived a virtualenv) is pointed at this one; anything else an admin edited is kept."""
    http_url = http_url or os.environ.get("DEMO_MCP_HTTP_URL") or None
    servers: list[McpServer] = []
    for definition in demo_server_definitions(http_url):
        server, created = McpServer.objects.get_or_create(name=definition["name"], defaults=definition)
        if not created and definition.get("command") and server.args == definition["args"] and not os.path.exists(server.command):
            server.command = definition["command"]
            server.save(update_fields=["command", "updated_at"])
        servers.append(server)
    return servers
