"""Sync MCP servers now: `manage.py sync_mcp_servers [name ...] [--demo] [--queue]`.

Without names, every enabled server. `--demo` first registers the demo servers (idempotent).
By default the sync runs here, in this process (no worker needed: what `make run` wants before
the demo starts); `--queue` hands each one to a Celery worker instead. A server whose last tool
list is still fresh by its own `ttlMs` (2026-07-28 servers may say how long) is left alone when no
names are given, unless `--force`.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from playground.mcp_servers import services
from playground.mcp_servers.models import McpServer


class Command(BaseCommand):
    help = "Connect to MCP servers and store their tools (all enabled servers unless names are given)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("names", nargs="*", help="server names (default: every enabled server)")
        parser.add_argument("--demo", action="store_true", help="register the demo servers first")
        parser.add_argument("--queue", action="store_true", help="queue Celery tasks instead of syncing here")
        parser.add_argument("--force", action="store_true", help="sync servers whose tool list is still fresh too")

    def handle(self, *args, names: list[str], demo: bool, queue: bool, force: bool = False, **options) -> None:
        if demo:
            services.register_demo_servers()
        servers = McpServer.objects.filter(name__in=names) if names else McpServer.objects.filter(enabled=True)
        missing = sorted(set(names) - set(servers.values_list("name", flat=True)))
        if missing:
            raise CommandError(f"no MCP server named {', '.join(missing)}")
        failures = 0
        now = timezone.now()
        for server in servers.order_by("name"):
            fresh_until = server.tools_fresh_until
            if not names and not force and fresh_until is not None and fresh_until > now:
                self.stdout.write(f"{server.name}: tool list fresh until {fresh_until:%Y-%m-%d %H:%M:%S} (the server's "
                                  "ttlMs); skipped (--force syncs it)")
                continue
            if queue:
                with transaction.atomic():
                    services.request_sync(server)
                self.stdout.write(f"{server.name}: sync queued")
                continue
            result = services.sync_server(server)
            if result.ok:
                self.stdout.write(
                    f"{server.name}: connected, {result.tool_count} tools "
                    f"(+{len(result.added)} ~{len(result.updated)} -{len(result.removed)}) in {result.duration_ms:.0f} ms"
                )
                for warning in result.warnings:
                    self.stdout.write(f"  warning: {warning}")
            else:
                failures += 1
                self.stderr.write(f"{server.name}: {result.status}: {result.error}")
        if failures:
            raise CommandError(f"{failures} server(s) failed to sync")
