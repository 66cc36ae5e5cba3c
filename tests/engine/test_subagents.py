from __future__ import annotations

import pytest

from playground.engine.permissions import PermissionPolicy
from playground.engine.requests import AgentSettings, ConversationState, build_request
from playground.engine.subagents import resolve_subagent_tools, subagent_policy
from playground.engine.tokens import CharEstimateCounter
from playground.engine.tools import Tool, ToolCatalog

from .conftest import mcp


def names(catalog):
    return [t.name for t in catalog]


def test_all_minus_denylist_intersect_allowlist_minus_disallowed(small_catalog):
    catalog = ToolCatalog([*small_catalog, Tool(name="Agent")])
    resolved = resolve_subagent_tools(catalog, global_denylist=["Agent"], allowed=["Read", "mcp__github", "Agent"], disallowed=["mcp__github__create_pull_request"])
    assert names(resolved) == ["Read", "mcp__github__create_issue", "mcp__github__list_issues"]


def test_no_allowlist_means_everything_not_denied(small_catalog):
    assert len(resolve_subagent_tools(small_catalog, global_denylist=[])) == len(small_catalog)


def test_a_subagent_with_only_deferred_tools_keeps_toolsearch():
    catalog = ToolCatalog([mcp("github", "create_issue"), Tool(name="Read")])
    resolved = resolve_subagent_tools(catalog, global_denylist=[], allowed=["mcp__github__*"])
    plan = build_request(resolved, PermissionPolicy(), AgentSettings(mode="true"), ConversationState(), token_counter=CharEstimateCounter())
    assert plan.tool_names == ["ToolSearch"]
    assert plan.deferred_tools == ["mcp__github__create_issue"]


def test_disallowing_toolsearch_turns_tool_search_off_for_that_subagent():
    catalog = ToolCatalog([mcp("github", "create_issue")])
    policy = subagent_policy(PermissionPolicy(), disallowed=["ToolSearch"], scope="reviewer")
    plan = build_request(catalog, policy, AgentSettings(mode="true"), ConversationState(), token_counter=CharEstimateCounter())
    assert not plan.decision.enabled and plan.tool_names == ["mcp__github__create_issue"]


def test_bad_patterns_name_the_list_they_came_from(small_catalog):
    with pytest.raises(ValueError, match="subagent allowlist"):
        resolve_subagent_tools(small_catalog, global_denylist=[], allowed=["bad name"])
