"""Load the demo data set: real MCP catalogs, built-in core tools, agent profiles and rules.

Idempotent: a second run creates only what is missing and leaves edits alone; `--force` puts the
shipped definitions, profile settings and rules back. Finally the MCP app's demo servers are
registered. The command lives in the MCP app because the demo spans both: registry rows (tools,
profiles, rules) and this app's built-in tools and demo servers.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from playground.engine.catalog_io import load_tools
from playground.engine.tools import Tool as EngineTool
from playground.mcp_servers.builtin_tools import BUILTIN_TOOL_DEFINITIONS
from playground.mcp_servers.services import register_demo_servers
from playground.registry import adapter, indexing
from playground.registry.demo_data import CATALOGS, CORE_TOOLS
from playground.engine.wires.anthropic_tool_changes import AnthropicToolChanges
from playground.registry.models import AgentProfile, PermissionChange, PermissionRule, Tool

ALWAYS_LOADED_BUILTINS = {"calculator"}

PROFILES: list[dict[str, Any]] = [
    {
        "name": "Tool search on (native)",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "system_prompt": "You are a helpful assistant. Use ToolSearch to find tools you do not have yet.",
    },
    {
        # Deferred names announced within a token budget (grouped, then server summaries): the third
        # profile of the agent evaluation's worked example (docs/agent-eval.md).
        "name": "Tool search on (budgeted)",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "announcement_layout": AgentProfile.Layout.BUDGETED,
        "system_prompt": "You are a helpful assistant. Use ToolSearch to find tools you do not have yet.",
    },
    {
        "name": "Tool search off",
        "tool_search_mode": "false",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "system_prompt": "You are a helpful assistant. Every tool is loaded up front.",
    },
    {
        "name": "Client-side (gateway)",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.CLIENT,
        "announcement_style": AgentProfile.Announcement.DELTA,
        "system_prompt": "You are a helpful assistant behind a gateway without tool_reference support.",
    },
    {
        "name": "auto:10",
        "tool_search_mode": "auto:10",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "system_prompt": "Tool search turns on when deferred tools would take at least 10% of the context window.",
    },
    # OpenAI's three ways (engine/openai_wire.py), so a task run can set every loading mode side by side
    # (docs/agent-eval.md); without OPENAI_API_KEY the demo agent answers on OpenAI's wire (labelled).
    {
        "name": "OpenAI hosted tool_search",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.SERVER,
        "provider": "openai",
        "system_prompt": "You are a helpful assistant. OpenAI's hosted tool_search finds the tools you do not have yet.",
    },
    {
        "name": "OpenAI client tool_search",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "provider": "openai",
        "system_prompt": "You are a helpful assistant. Use tool_search to find tools you do not have yet.",
    },
    {
        "name": "OpenAI functions",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.CLIENT,
        "provider": "openai",
        "system_prompt": "You are a helpful assistant. Call the ToolSearch function to find tools you do not have yet.",
    },
    {
        # Anthropic's mid-conversation tool changes: the harness ranks each message before the turn and
        # adds the likely tools by tool_addition (no search round trip); no ToolSearch at all.
        "name": "Tool changes (predicted)",
        "tool_search_mode": "true",
        "wire_style": AnthropicToolChanges.name,
        "tool_changes_search": False,
        "system_prompt": "You are a helpful assistant. The tools likely to help are added before each of your turns.",
    },
    {
        # The hybrid: the predicted tools are added, ToolSearch stays for what the prediction missed.
        "name": "Tool changes + search",
        "tool_search_mode": "true",
        "wire_style": AnthropicToolChanges.name,
        "tool_changes_search": True,
        "system_prompt": "You are a helpful assistant. Likely tools are added before each turn; use ToolSearch "
                         "to find others.",
    },
    {
        "name": "Research subagent",
        "tool_search_mode": "true",
        "wire_style": AgentProfile.WireStyle.NATIVE,
        "is_subagent": True,
        "max_results": 3,
        "disallowed_tools": ["Write"],
        "system_prompt": "You are a research subagent: read and search, never write.",
    },
]

# (effect, pattern, profile name or None, note)
RULES: list[tuple[str, str, str | None, str]] = [
    ("deny", "mcp__desktop-commander__kill_process", None, "Demo: a dangerous tool nobody gets."),
    ("deny", "mcp__kubernetes__kubectl_delete", None, "Demo: no deletes on the cluster."),
    ("ask", "Write", None, "Demo: writing files needs a person's confirmation."),
    ("ask", "mcp__github__push_files", None, "Demo: pushes need confirmation."),
    ("deny", "mcp__notion", "Research subagent", "Demo: the research subagent stays out of Notion."),
]


def builtin_tools() -> list[EngineTool]:
    """The built-ins the executor runs in-process (the MCP app's `BUILTIN_TOOL_DEFINITIONS`), then the
    core tool stand-ins."""
    runnable = [
        EngineTool(**definition, always_load=definition["name"] in ALWAYS_LOADED_BUILTINS)
        for definition in BUILTIN_TOOL_DEFINITIONS
    ]
    return runnable + load_tools(CORE_TOOLS)


class Command(BaseCommand):
    help = "Load the demo tools, profiles and permission rules (idempotent; --force reloads)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--force", action="store_true", help="Put shipped definitions, profiles and rules back.")
        parser.add_argument("--skip-servers", action="store_true", help="Do not register the MCP demo servers.")

    def handle(self, *args: Any, force: bool = False, skip_servers: bool = False, **options: Any) -> None:
        with transaction.atomic():
            shipped_builtins = builtin_tools()
            builtins = self._load_tools(shipped_builtins, Tool.Source.BUILTIN, force)
            if force:  # a reload also drops built-ins an earlier version of the demo shipped
                Tool.objects.filter(source=Tool.Source.BUILTIN).exclude(name__in=[t.name for t in shipped_builtins]).delete()
            imported = (0, 0)
            for path in CATALOGS:
                created, updated = self._load_tools(load_tools(path), Tool.Source.IMPORTED, force)
                imported = (imported[0] + created, imported[1] + updated)
            profiles = self._load_profiles(force)
            rules = self._load_rules(force)
            indexing.request_index_build()  # the catalog's vectors, in the background
        self.stdout.write(
            f"Demo data: built-in tools {builtins[0]} created / {builtins[1]} updated; "
            f"catalog tools {imported[0]} created / {imported[1]} updated; "
            f"profiles {profiles} created or reset; rules {rules} created."
        )
        if not skip_servers:
            self._register_demo_servers()

    def _load_tools(self, tools: list[EngineTool], source: str, force: bool) -> tuple[int, int]:
        existing = {row.name: row for row in Tool.objects.filter(name__in=[t.name for t in tools])}
        created: list[Tool] = []
        updated: list[Tool] = []
        for tool in tools:
            row = existing.get(tool.name)
            if row is not None and not force:
                continue
            row = adapter.fill_tool_row(row or Tool(), tool, source=source)
            (updated if row.pk else created).append(row)
        Tool.objects.bulk_create(created, batch_size=500)
        if updated:
            for row in updated:
                row.save()
        return len(created), len(updated)

    def _load_profiles(self, force: bool) -> int:
        count = 0
        for spec in PROFILES:
            values = {k: v for k, v in spec.items() if k != "name"}
            if force:
                defaults = {f.name: f.get_default() for f in AgentProfile._meta.concrete_fields if f.has_default()}
                AgentProfile.objects.update_or_create(name=spec["name"], defaults={**defaults, **values})
                count += 1
            else:
                _, created = AgentProfile.objects.get_or_create(name=spec["name"], defaults=values)
                count += int(created)
        return count

    def _load_rules(self, force: bool) -> int:
        profiles = {p.name: p for p in AgentProfile.objects.all()}
        count = 0
        for effect, pattern, profile_name, note in RULES:
            profile = profiles.get(profile_name) if profile_name else None
            rule, created = PermissionRule.objects.get_or_create(
                pattern=pattern, profile=profile, defaults={"effect": effect, "note": note}
            )
            if created:
                count += 1
                PermissionChange.objects.create(
                    rule_id=rule.pk, action=PermissionChange.Action.CREATE, before=None,
                    after={"effect": effect, "pattern": pattern, "profile": profile_name, "note": note},
                )
            elif force and (rule.effect, rule.note) != (effect, note):
                before = {"effect": rule.effect, "pattern": pattern, "profile": profile_name, "note": rule.note}
                rule.effect, rule.note = effect, note
                rule.save()
                PermissionChange.objects.create(
                    rule_id=rule.pk, action=PermissionChange.Action.UPDATE, before=before,
                    after={"effect": effect, "pattern": pattern, "profile": profile_name, "note": note},
                )
        return count

    def _register_demo_servers(self) -> None:
        servers = register_demo_servers()
        names = ", ".join(getattr(server, "name", str(server)) for server in servers)
        self.stdout.write(f"MCP demo servers registered: {names or 'none'}.")
