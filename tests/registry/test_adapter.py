from __future__ import annotations

import pytest
from django.test import override_settings

from playground.engine.modes import parse_mode
from playground.engine.prompt_cache import breakpoints_of
from playground.engine.search.base import SearchBackend
from playground.engine.tools import ToolCatalog
from playground.mcp_servers.models import McpServer
from playground.registry import adapter, backends, services
from playground.registry.models import PermissionRule, Tool

from .conftest import make_tool

pytestmark = pytest.mark.django_db


def test_it_maps_a_row_to_an_engine_tool(tools):
    row = Tool.objects.get(name="mcp__github__create_issue")
    tool = adapter.tool_to_engine(row)
    assert tool.name == row.name
    assert tool.is_mcp and tool.server == "github"
    assert tool.input_schema == {"type": "object", "properties": {"title": {"type": "string"}}}
    assert adapter.tool_to_engine(Tool.objects.get(name="Read")).is_mcp is False


def test_it_takes_the_server_name_from_a_registered_server():
    server = McpServer.objects.create(name="time")
    row = make_tool("mcp__time__now", "What time is it", server=server)
    assert adapter.tool_to_engine(row).server == "time"


def test_the_catalog_holds_enabled_tools_builtins_first(tools):
    catalog = adapter.engine_catalog()
    assert isinstance(catalog, ToolCatalog)
    names = [t.name for t in catalog]
    assert "mcp__slack__list_channels" not in names  # disabled
    assert names[:2] == ["Read", "Write"]
    assert catalog.is_deferred("mcp__github__create_issue")
    assert not catalog.is_deferred("Read")


def test_the_catalog_is_cached_until_a_tool_changes(tools, django_assert_num_queries):
    first = adapter.engine_catalog()
    with django_assert_num_queries(1):  # only the version key
        assert adapter.engine_catalog() is first
    row = Tool.objects.get(name="Write")
    row.description = "Write a file, changed"
    row.save()
    second = adapter.engine_catalog()
    assert second is not first
    assert second.get("Write").description == "Write a file, changed"


def test_bulk_actions_and_deletes_invalidate_the_catalog(tools):
    first = adapter.engine_catalog()
    services.bulk_tool_action(Tool.objects.filter(name="mcp__slack__list_channels"), "enable")
    second = adapter.engine_catalog()
    assert "mcp__slack__list_channels" in second and second is not first
    Tool.objects.filter(name="Write").delete()
    assert "Write" not in adapter.engine_catalog()


def test_saving_keeps_the_token_estimate_and_deferral_current(tools):
    row = Tool.objects.get(name="Write")
    before = row.token_estimate
    assert before > 0
    row.description = "Write a file in the sandbox. " * 20
    row.should_defer = True
    row.save()
    row.refresh_from_db()
    assert row.token_estimate > before
    expected = adapter.token_counter().count_tools([adapter.tool_to_engine(row).to_api()])
    assert row.token_estimate == expected
    assert row.deferred is True
    row.always_load = True
    row.save()
    row.refresh_from_db()
    assert row.deferred is False


def test_the_policy_has_global_rules_and_only_this_profiles_rules(tools, profile, subagent_profile):
    PermissionRule.objects.create(effect="deny", pattern="mcp__github__delete_repo")
    PermissionRule.objects.create(effect="ask", pattern="Write", profile=profile)
    PermissionRule.objects.create(effect="deny", pattern="Read", profile=subagent_profile)
    policy = adapter.permission_policy(profile)
    assert policy.decide("mcp__github__delete_repo").effect == "deny"
    assert policy.decide("Write").effect == "ask"
    assert policy.decide("Read").effect == "allow"
    assert adapter.permission_policy().decide("Write").effect == "allow"


def test_subagent_profiles_lose_the_denylisted_tools(tools, subagent_profile):
    make_tool("Agent", "Start a subagent", source=Tool.Source.BUILTIN)
    with override_settings(AGENT_TOOL_DENYLIST=["Agent"]):
        narrowed = adapter.profile_catalog(subagent_profile)
    assert "Agent" not in narrowed
    assert "Read" in narrowed
    assert "Agent" in adapter.profile_catalog(None)


def test_filtered_catalog_is_reused_while_nothing_changes(tools, profile, deny_delete_rule):
    first = adapter.filtered_catalog(profile)
    assert adapter.filtered_catalog(profile) is first
    assert [name for name, _ in first[1].excluded] == ["mcp__github__delete_repo"]
    PermissionRule.objects.create(effect="deny", pattern="mcp__slack")
    second = adapter.filtered_catalog(profile)
    assert second is not first
    assert "mcp__slack__post_message" in second[1].excluded_names


@override_settings(ENABLE_TOOL_SEARCH="auto:7", DEFAULT_MODEL="claude-test-model", CONTEXT_WINDOW_TOKENS=123_000,
                   TOOL_SEARCH_UNSUPPORTED_MODELS=["haiku"])
def test_agent_settings_fall_back_to_django_settings(profile):
    profile.tool_search_mode = ""
    settings = adapter.agent_settings(profile)
    assert settings.model == "claude-test-model"
    assert settings.context_window == 123_000
    assert parse_mode(settings.mode).label == "auto:7"
    assert settings.unsupported_model_patterns == ("haiku",)
    profile.tool_search_mode = "false"
    profile.model = "claude-other"
    settings = adapter.agent_settings(profile)
    assert settings.model == "claude-other"
    assert parse_mode(settings.mode).label == "false"


def test_the_server_wire_style_is_resolved_here_and_an_unknown_one_refused_with_a_reason(profile, settings):
    settings.ANTHROPIC_SERVER_SEARCH_TOOL = "bm25"
    profile.wire_style = "server"
    resolved = adapter.agent_settings(profile)
    assert (resolved.wire, resolved.server_search, resolved.planned_as) == ("server", "bm25", "native")
    profile.wire_style = "carrier-pigeon"
    with pytest.raises(ValueError, match="wire style 'carrier-pigeon'"):
        adapter.agent_settings(profile)


def test_a_subagent_that_disallows_toolsearch_gets_the_engines_deny_rule(subagent_profile):
    subagent_profile.disallowed_tools = ["ToolSearch"]
    assert adapter.permission_policy(subagent_profile).decide("ToolSearch").effect == "deny"
    assert adapter.permission_policy(None).decide("ToolSearch").effect == "allow"


def test_search_backend_is_one_instance_per_name():
    backend = backends.search_backend("")
    assert isinstance(backend, SearchBackend)
    assert backends.search_backend("default") is backend
    assert backends.search_backend(backend.name) is backend
    with pytest.raises(ValueError):
        backends.search_backend("no-such-backend")


def test_the_default_backend_may_carry_settings():
    with override_settings(TOOLSEARCH_DEFAULT_BACKEND="bm25:usage_weight=0"):
        backend = backends.search_backend("")
        assert backend.name == "bm25:usage_weight=0" and backend.usage_weight == 0
        assert backends.search_backend("default") is backend
    with override_settings(TOOLSEARCH_DEFAULT_BACKEND="bm25:no_such_option=1"), pytest.raises(ValueError, match="no_such_option"):
        backends.search_backend("")


def test_pending_mcp_servers_lists_enabled_pending_servers():
    McpServer.objects.create(name="alpha", status=McpServer.Status.PENDING)
    McpServer.objects.create(name="beta", status=McpServer.Status.CONNECTED)
    McpServer.objects.create(name="gamma", status=McpServer.Status.PENDING, enabled=False)
    assert adapter.pending_mcp_servers() == ["alpha"]


def test_registered_servers_is_the_mcp_server_model_reached_through_the_tool_foreign_key():
    """The registry sits below the MCP app: it reads server rows through `Tool.server`, not an import."""
    assert adapter.registered_servers() is McpServer


def test_an_engine_tool_written_onto_a_row_reads_back_the_same(tools):
    original = adapter.tool_to_engine(Tool.objects.get(name="mcp__github__create_issue"))
    row = adapter.fill_tool_row(Tool(), original, source=Tool.Source.IMPORTED)
    again = adapter.tool_to_engine(row)
    assert again.to_api() == original.to_api() and again.server == original.server
    assert row.enabled and row.source == Tool.Source.IMPORTED and row.deferred and row.token_estimate > 0


def test_a_reimport_moves_the_definition_and_keeps_the_rows_own_choices(tools):
    row = Tool.objects.get(name="Read")
    row.always_load, row.enabled = True, False
    changed = adapter.tool_to_engine(row)
    changed = type(changed)(name=changed.name, description="Read a file, newly described.", input_schema=changed.input_schema)
    adapter.update_definition(row, changed)
    assert row.description == "Read a file, newly described." and row.always_load and not row.enabled


def test_a_named_subagent_runs_with_its_profiles_tools_rules_and_settings(tools, subagent_profile):
    subagent_profile.disallowed_tools = ["ToolSearch", "Write"]
    subagent_profile.save()
    parent_policy = adapter.permission_policy(None)
    catalog, policy, settings, label = adapter.subagent_setup(
        adapter.engine_catalog(), parent_policy, adapter.agent_settings(None), subagent_profile.name)
    assert label == "Sub" and "Write" not in catalog and "Read" in catalog
    assert policy.decide("ToolSearch").effect == "deny"
    assert [r.pattern for r in policy.rules].count("ToolSearch") == 1  # the profile's deny rule, once
    assert settings.max_results == subagent_profile.max_results


def test_an_unnamed_subagent_gets_the_parents_tools_less_the_agent_denylist(tools):
    make_tool("Agent", "Start a subagent", source=Tool.Source.BUILTIN)
    with override_settings(AGENT_TOOL_DENYLIST=["Agent", "ToolSearch"]):
        catalog, policy, _, label = adapter.subagent_setup(
            adapter.engine_catalog(), adapter.permission_policy(None), adapter.agent_settings(None), "")
    assert label == "general-purpose" and "Agent" not in catalog and "Read" in catalog
    assert policy.decide("ToolSearch").effect == "deny"


def test_a_stored_compaction_comes_back_as_the_engines_boundary():
    from playground.engine.history import CompactionBoundary

    boundary = CompactionBoundary(summary="s", discovered_tools=("a",), announced_tools=("b",), metadata={"k": 1})
    assert adapter.compaction_boundary(boundary.to_dict()) == boundary
    assert adapter.compaction_boundary({}) is None and adapter.compaction_boundary(None) is None


def test_the_catalog_shares_one_decoded_object_per_distinct_schema_with_the_rows_values(db):
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "Where"}}, "required": ["city"]}
    for name in ("mcp__a__weather", "mcp__b__weather", "mcp__c__other"):
        make_tool(name, "Weather", input_schema=schema if name != "mcp__c__other" else {"type": "object", "properties": {}})
    catalog = adapter.engine_catalog()
    a, b, c = (catalog.get(n) for n in ("mcp__a__weather", "mcp__b__weather", "mcp__c__other"))
    assert a.input_schema == schema and c.input_schema == {"type": "object", "properties": {}}
    assert a.input_schema is b.input_schema  # one copy for the same text
    assert a.content_hash == adapter.tool_to_engine(Tool.objects.get(name="mcp__a__weather")).content_hash


def test_a_requests_permission_filter_is_kept_per_catalog_and_rules(tools):
    catalog = adapter.engine_catalog()
    policy = adapter.permission_policy(None)
    first = adapter.request_filter(catalog, policy)
    assert adapter.request_filter(catalog, adapter.permission_policy(None)) is first
    PermissionRule.objects.create(effect="deny", pattern="mcp__github")
    denied = adapter.request_filter(catalog, adapter.permission_policy(None))
    assert denied is not first and "mcp__github__create_issue" in denied.excluded_names
    assert "mcp__github__create_issue" not in denied.permitted


def test_the_prompt_cache_setting_reaches_every_profiles_wire_request(profile, settings, tools):
    assert adapter.agent_settings(profile).prompt_cache is False
    settings.PROMPT_CACHE, settings.PROMPT_CACHE_TTL = True, "1h"
    engine_settings = adapter.agent_settings(profile)
    assert (engine_settings.prompt_cache, engine_settings.prompt_cache_ttl) == (True, "1h")
    turn = adapter.plan_turn(adapter.engine_catalog(), adapter.permission_policy(profile), engine_settings,
                             learn_from_usage=False)
    assert breakpoints_of(turn.wire_request())[0].startswith("tools: ")


def test_the_catalog_is_read_with_the_cycle_collector_paused_and_back_after(tools, monkeypatch):
    """A 100,000-tool catalog's allocations set off full collector passes over the whole process
    (0.4–0.8 s of a first search); its tools hold no cycles, so the collector waits until it is read."""
    import gc

    from playground.registry import tool_fields

    seen: list[bool] = []
    made = tool_fields.engine_tool

    def watched(**fields):
        seen.append(gc.isenabled())
        return made(**fields)

    monkeypatch.setattr(adapter, "engine_tool", watched)
    assert gc.isenabled()
    catalog = adapter.engine_catalog()
    assert len(seen) == len(catalog) and not any(seen)
    assert gc.isenabled()


def test_a_paused_collector_comes_back_as_it_was():
    import gc

    from playground.engine.memory import collector_paused

    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # someone else turned it off: left off
    finally:
        gc.enable()
