from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import override_settings

from playground.registry.models import AgentProfile, PermissionChange, PermissionRule, Tool

pytestmark = pytest.mark.django_db
DEMO = Path(__file__).resolve().parents[2] / "playground" / "registry" / "demo_data"


def load(*args) -> str:
    out = StringIO()
    call_command("load_demo_data", "--skip-servers", *args, stdout=out)
    return out.getvalue()


def test_the_demo_catalog_ships_with_its_licenses():
    assert (DEMO / "catalog.jsonl").exists()
    assert (DEMO / "NOTICE").exists() and (DEMO / "README.md").exists()
    licenses = {p.name for p in (DEMO / "LICENSES").iterdir()}
    assert "livemcpbench.LICENSE" in licenses and len(licenses) >= 10


def test_it_loads_tools_profiles_and_rules():
    load()
    catalog_lines = sum(1 for line in (DEMO / "catalog.jsonl").read_text().splitlines() if line.strip())
    assert Tool.objects.filter(source=Tool.Source.IMPORTED).count() == catalog_lines == 706
    builtins = set(Tool.objects.filter(source=Tool.Source.BUILTIN).values_list("name", flat=True))
    assert {"Read", "Write", "Agent", "echo", "calculator"} <= builtins
    assert Tool.objects.get(name="calculator").always_load
    assert Tool.objects.filter(token_estimate=0).count() == 0
    assert Tool.objects.get(name="mcp__time__convert_time").deferred is True
    assert Tool.objects.get(name="Read").deferred is False
    assert AgentProfile.objects.filter(name="Tool search off", tool_search_mode="false").exists()
    assert AgentProfile.objects.get(name="Research subagent").is_subagent
    assert PermissionRule.objects.filter(effect="deny", pattern="mcp__desktop-commander__kill_process").exists()
    assert PermissionChange.objects.count() == PermissionRule.objects.count()


def test_it_is_idempotent_and_keeps_local_edits():
    load()
    counts = (Tool.objects.count(), AgentProfile.objects.count(), PermissionRule.objects.count())
    tool = Tool.objects.get(name="mcp__time__convert_time")
    tool.description = "edited locally"
    tool.save()
    output = load()
    assert (Tool.objects.count(), AgentProfile.objects.count(), PermissionRule.objects.count()) == counts
    assert "0 created" in output
    assert Tool.objects.get(name="mcp__time__convert_time").description == "edited locally"


def test_force_puts_the_shipped_data_back():
    load()
    Tool.objects.create(name="OldBuiltin", source=Tool.Source.BUILTIN)
    tool = Tool.objects.get(name="mcp__time__convert_time")
    tool.description = "edited locally"
    tool.enabled = False
    tool.save()
    profile = AgentProfile.objects.get(name="Tool search off")
    profile.tool_search_mode = "true"
    profile.save()
    load("--force")
    tool.refresh_from_db()
    assert tool.description != "edited locally" and tool.enabled
    assert AgentProfile.objects.get(name="Tool search off").tool_search_mode == "false"
    assert not Tool.objects.filter(name="OldBuiltin").exists()


@override_settings(PLAYGROUND_ADMIN_USERNAME="root", PLAYGROUND_ADMIN_PASSWORD="")
def test_ensure_admin_prints_a_generated_password_once():
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    text = out.getvalue()
    password = text.split("with password ")[1].split(" ")[0]
    user = get_user_model().objects.get(username="root")
    assert user.is_superuser and user.is_staff and user.check_password(password)
    again = StringIO()
    call_command("ensure_admin", stdout=again)
    assert password not in again.getvalue() and "exists" in again.getvalue()


@override_settings(PLAYGROUND_ADMIN_USERNAME="boss", PLAYGROUND_ADMIN_PASSWORD="from-the-env-123")
def test_ensure_admin_uses_the_configured_password():
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    assert "from-the-env-123" not in out.getvalue()
    assert get_user_model().objects.get(username="boss").check_password("from-the-env-123")


def test_it_registers_the_mcp_demo_servers():
    from playground.mcp_servers.models import McpServer

    out = StringIO()
    call_command("load_demo_data", stdout=out)
    assert McpServer.objects.exists()
    assert "MCP demo servers registered:" in out.getvalue()
    assert McpServer.objects.first().name in out.getvalue()
