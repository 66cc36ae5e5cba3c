"""Registry fixtures: a small tool world and helpers to make more."""
from __future__ import annotations

import pytest

from playground.registry import adapter, backends
from playground.registry.models import AgentProfile, PermissionRule, Tool


@pytest.fixture(autouse=True)
def fresh_adapter_caches():
    """Per-process catalog, backend (and usage log) caches must not leak between tests (each test has its own rows)."""
    from playground.conversations.usage import reset_usage_cache

    adapter.reset_caches()

    backends.reset_caches()
    reset_usage_cache()
    yield
    adapter.reset_caches()
    backends.reset_caches()
    reset_usage_cache()


def make_tool(name: str, description: str = "", **fields) -> Tool:
    fields.setdefault("input_schema", {"type": "object", "properties": {}})
    if name.startswith("mcp__") and "server_name" not in fields and "server" not in fields:
        fields["server_name"] = name.split("__")[1]
    return Tool.objects.create(name=name, description=description, **fields)


@pytest.fixture
def tools(db):
    """Two built-ins and a handful of MCP tools on two servers."""
    return [
        make_tool("Read", "Read a file from the sandbox", source=Tool.Source.BUILTIN, always_load=True),
        make_tool("Write", "Write a file in the sandbox", source=Tool.Source.BUILTIN),
        make_tool("mcp__github__create_issue", "Create a new issue in a GitHub repository",
                  input_schema={"type": "object", "properties": {"title": {"type": "string"}}}, source=Tool.Source.IMPORTED),
        make_tool("mcp__github__list_issues", "List issues of a GitHub repository", source=Tool.Source.IMPORTED),
        make_tool("mcp__github__delete_repo", "Delete a GitHub repository", source=Tool.Source.IMPORTED),
        make_tool("mcp__slack__post_message", "Post a message to a Slack channel", source=Tool.Source.IMPORTED),
        make_tool("mcp__slack__list_channels", "List Slack channels", source=Tool.Source.IMPORTED, enabled=False),
    ]


@pytest.fixture
def profile(db):
    return AgentProfile.objects.create(name="Native", tool_search_mode="true", wire_style="native")


@pytest.fixture
def subagent_profile(db):
    return AgentProfile.objects.create(name="Sub", tool_search_mode="true", is_subagent=True)


@pytest.fixture
def deny_delete_rule(db):
    return PermissionRule.objects.create(effect="deny", pattern="mcp__github__delete_repo", note="dangerous")


def bulk_tools(count: int, server: str = "bulk") -> None:
    """Many tools fast (bulk_create skips save(), so derived fields are filled here)."""
    rows = []
    for i in range(count):
        row = Tool(
            name=f"mcp__{server}__tool_{i}",
            description=f"Bulk tool number {i} for {'weather forecast' if i % 3 == 0 else 'calendar events'}",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
            server_name=server,
            source=Tool.Source.IMPORTED,
        )
        row.refresh_derived_fields()
        rows.append(row)
    Tool.objects.bulk_create(rows, batch_size=1000)
