"""Rows → engine objects. The only place the Django side builds engine objects.

Views, tasks and consumers ask this module for a `ToolCatalog`, a `PermissionPolicy`, `AgentSettings`,
a subagent's tools and rules, a stored compaction boundary, a usage log or a token counter, and
write engine tools back onto rows through it (`fill_tool_row`, `update_definition`); the rules
themselves (deferral, permissions, mode decision, ranking) live in `playground.engine` and are
never restated here. The search backends a process keeps are `backends.py`'s; which backend
settings the inspector accepts, `inspector_options.py`'s.

Caching: the enabled-tool catalog is rebuilt only when the tool table changes (a cheap
`count + max(updated_at)` version key, one aggregate query), and permission-filtered catalogs are
kept per (catalog version, rules, subagent settings), so a backend's index — cached by catalog
fingerprint — is reused across requests. Both caches are per process; every process reaches the
same answer from the database.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet, TextField
from django.db.models.functions import Cast

from playground.engine.history import CompactionBoundary
from playground.engine.memory import collector_paused, return_freed_memory
from playground.engine.permissions import PermissionFilterResult, PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.requests import permission_filter as engine_permission_filter
from playground.engine.search.base import SearchBackend
from playground.engine.search.usage import UsageLog
from playground.engine.subagents import resolve_subagent_tools, subagent_policy
from playground.engine.tools import Tool as EngineTool
from playground.engine.tools import ToolCatalog, with_stored_content_hash
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.wires.registry import wire_style
from playground.engine.turn import TurnPlan
from playground.engine.turn import plan_turn as engine_plan_turn
from playground.registry import ports
from playground.registry.models import AgentProfile
from playground.registry.models import PermissionRule as RuleRow
from playground.registry.models import Tool
from playground.registry.tool_fields import engine_tool, refresh_derived_fields, token_counter, tool_to_engine

_FILTERED_CACHE_SIZE = 16
# Each entry holds its catalog (a run's, or a subagent's narrowed copy): few, so that a worker over a
# catalog of 100,000 tools does not keep many of them alive.
_REQUEST_FILTER_CACHE_SIZE = 4

_lock = threading.Lock()
_catalog_cache: tuple[tuple, ToolCatalog] | None = None
_filtered_cache: OrderedDict[tuple, tuple[ToolCatalog, PermissionFilterResult]] = OrderedDict()
_request_filter_cache: OrderedDict[tuple, tuple[ToolCatalog, PermissionFilterResult]] = OrderedDict()


# -- tools ---------------------------------------------------------------------------------------
def fill_tool_row(row: Tool, tool: EngineTool, *, source: str) -> Tool:
    """`tool` written onto `row` (the reverse of `tool_to_engine`): its definition, server name and
    loading flags, enabled, and the fields the engine derives. The row is not saved."""
    _copy_definition(row, tool)
    row.name = tool.name
    row.server_name = tool.server or ""
    row.should_defer = tool.should_defer
    row.always_load = tool.always_load
    row.enabled = True
    row.source = source
    refresh_derived_fields(row)
    return row


def update_definition(row: Tool, tool: EngineTool) -> Tool:
    """Only `tool`'s definition (description, input schema, search hint) onto `row`: a re-import
    keeps the row's local choices (enabled, deferral, always-load, the server link). Not saved."""
    _copy_definition(row, tool)
    refresh_derived_fields(row)
    return row


def _copy_definition(row: Tool, tool: EngineTool) -> None:
    row.description = tool.description
    row.input_schema = dict(tool.input_schema)
    row.search_hint = tool.search_hint


def catalog_version() -> tuple:
    """Changes whenever any tool row is created, saved, bulk-updated (with updated_at) or deleted."""
    row = Tool.objects.aggregate(count=Count("id"), latest=Max("updated_at"))
    return (row["count"], row["latest"])


def engine_catalog(queryset: QuerySet | None = None) -> ToolCatalog:
    """The catalog of enabled tools (built-ins first, then by name), cached by `catalog_version()`.

    With an explicit queryset, that queryset is built as given (one query, not cached).
    """
    global _catalog_cache
    if queryset is not None:
        return _build_catalog(queryset)
    version = catalog_version()
    with _lock:
        if _catalog_cache is not None and _catalog_cache[0] == version:
            return _catalog_cache[1]
    catalog = _build_catalog(Tool.objects.filter(enabled=True))
    with _lock:
        _catalog_cache = (version, catalog)
        _filtered_cache.clear()
        _request_filter_cache.clear()  # it holds the old catalogs (100 MB each at 100,000 tools)
    return catalog


_CATALOG_FIELDS = ("name", "description", "search_hint", "server_name", "server__name",
                   "should_defer", "always_load", "source", "content_hash")


class _SchemaReader:
    """Input schemas decoded from their JSON text, for one catalog build. Decoded JSON is most of a
    large catalog's memory (200 MB for the 100,000 tools of the grown bench catalog), so: a schema
    text met before gives the same (read-only) object again, and the strings of the ones decoded are
    shared (every schema repeats "type", "string", "description"…; half the decoded size)."""

    def __init__(self) -> None:
        self.decoded: dict[str, Any] = {}
        self.strings: dict[str, str] = {}

    def read(self, text: str | None) -> Any:
        if text is None:
            return None
        found = self.decoded.get(text)
        if found is None:
            found = self.decoded[text] = self._shared(json.loads(text))
        return found

    def _shared(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.strings.setdefault(value, value)
        if isinstance(value, dict):
            strings = self.strings
            return {strings.setdefault(k, k): self._shared(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._shared(v) for v in value]
        return value


_CATALOG_CHUNK = 2_000


def _build_catalog(queryset: QuerySet) -> ToolCatalog:
    """One query; plain values rather than model instances (a cold build of 10,000 tools is mostly
    ORM), read in chunks: the rows of 100,000 tools are never all in memory beside their tools, and
    the memory their decoding used is handed back afterwards (a web process's size is what it keeps)."""
    with collector_paused():  # tools, schemas and rows hold no cycles
        catalog = _read_catalog(queryset)
    if len(catalog) >= _CATALOG_CHUNK:
        return_freed_memory(collect=False)
    return catalog


def _read_catalog(queryset: QuerySet) -> ToolCatalog:
    keyed: list[tuple[bool, str, EngineTool]] = []
    schemas = _SchemaReader()
    # Tuples, not a dict per row: 100,000 rows are read on a fresh process's first search.
    rows = queryset.order_by().values_list(*_CATALOG_FIELDS, Cast("input_schema", TextField()))
    for name, description, search_hint, server_name, server, should_defer, always_load, source, content_hash, schema_text \
            in rows.iterator(chunk_size=_CATALOG_CHUNK):
        keyed.append((source != Tool.Source.BUILTIN, name, with_stored_content_hash(engine_tool(
            name=name,
            description=description,
            input_schema=schemas.read(schema_text),
            search_hint=search_hint,
            server=server or server_name,
            should_defer=should_defer,
            always_load=always_load,
        ), content_hash)))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return ToolCatalog(tool for _, _, tool in keyed)


# -- permissions and profiles --------------------------------------------------------------------
def permission_rules(profile: AgentProfile | None = None) -> list[PermissionRule]:
    """Global rules, then the profile's own rules (engine order: deny > ask > allow regardless)."""
    scope = Q(profile__isnull=True)
    if profile is not None and profile.pk:
        scope |= Q(profile=profile)
    rows = RuleRow.objects.filter(scope).select_related("profile").order_by("profile_id", "pattern", "id")
    return [_engine_rule(row) for row in rows]


def rules_by_profile() -> tuple[list[PermissionRule], dict[int, list[PermissionRule]]]:
    """Every rule in one query: the global ones, and each profile's own by profile id (for pages
    that decide for all profiles at once; `permission_policy(profile, rules=global + own)`)."""
    global_rules: list[PermissionRule] = []
    own: dict[int, list[PermissionRule]] = {}
    for row in RuleRow.objects.select_related("profile").order_by("profile_id", "pattern", "id"):
        (own.setdefault(row.profile_id, []) if row.profile_id else global_rules).append(_engine_rule(row))
    return global_rules, own


def _engine_rule(row: Any) -> PermissionRule:
    return PermissionRule(effect=row.effect, pattern=row.pattern,
                          scope=row.profile.name if row.profile_id else "global", rule_id=row.pk)


def permission_policy(profile: AgentProfile | None = None, *, rules: Sequence[PermissionRule] | None = None) -> PermissionPolicy:
    """Global rules + the profile's rules; a profile that lists ToolSearch among its disallowed tools
    (or a subagent, under the global agent denylist) gets the engine's ToolSearch deny rule too."""
    policy = PermissionPolicy(list(rules) if rules is not None else permission_rules(profile))
    if profile is None:
        return policy
    return subagent_policy(
        policy,
        global_denylist=list(settings.AGENT_TOOL_DENYLIST) if profile.is_subagent else [],
        disallowed=list(profile.disallowed_tools or []),
        scope=profile.name,
    )


def profile_catalog(profile: AgentProfile | None, catalog: ToolCatalog | None = None) -> ToolCatalog:
    """The tools a profile starts from: the enabled catalog, narrowed for subagents.

    Subagent profiles lose the global agent denylist (settings.AGENT_TOOL_DENYLIST); any profile's
    allowed / disallowed lists narrow it further. The engine's `resolve_subagent_tools` decides.
    """
    catalog = catalog if catalog is not None else engine_catalog()
    if profile is None:
        return catalog
    allowed = list(profile.allowed_tools or [])
    disallowed = list(profile.disallowed_tools or [])
    if not profile.is_subagent and not allowed and not disallowed:
        return catalog
    return resolve_subagent_tools(
        catalog,
        global_denylist=list(settings.AGENT_TOOL_DENYLIST) if profile.is_subagent else [],
        allowed=allowed or None,
        disallowed=disallowed,
    )


def filtered_catalog(
    profile: AgentProfile | None = None, *, policy: PermissionPolicy | None = None
) -> tuple[ToolCatalog, PermissionFilterResult]:
    """(the profile's catalog, the policy's filter of it), cached so backends keep their index.
    A caller that needs the policy too passes it in (`permission_policy(profile)`): the rules are
    then read once."""
    catalog = engine_catalog()
    policy = policy if policy is not None else permission_policy(profile)

    def compute() -> tuple[ToolCatalog, PermissionFilterResult]:
        narrowed = profile_catalog(profile, catalog)
        return narrowed, policy.filter(narrowed)

    key = (id(catalog), _rules_key(policy), _profile_signature(profile))
    return _kept(_filtered_cache, key, _FILTERED_CACHE_SIZE, compute)


def request_filter(catalog: ToolCatalog, policy: PermissionPolicy) -> PermissionFilterResult:
    """The engine's permission step of a request (`requests.permission_filter`) for this catalog and
    these rules, kept per process: every turn of every run over the same cached catalog and rules
    gets the same answer, and deciding 100,000 tools again per turn is most of a turn's planning.
    The entry holds its catalog, so the catalog's id in the key is not reused while it is kept."""
    key = (id(catalog), _rules_key(policy))
    return _kept(_request_filter_cache, key, _REQUEST_FILTER_CACHE_SIZE,
                 lambda: (catalog, engine_permission_filter(catalog, policy)))[1]


def _rules_key(policy: PermissionPolicy) -> tuple:
    return tuple((r.effect, r.pattern, r.scope) for r in policy.rules)


def _kept(cache: OrderedDict, key: tuple, size: int, compute: Callable[[], Any]) -> Any:
    """`cache[key]`, computed on a miss and kept (least recently used dropped past `size` entries)."""
    with _lock:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
    value = compute()
    with _lock:
        cache[key] = value
        while len(cache) > size:
            cache.popitem(last=False)
    return value


def _profile_signature(profile: AgentProfile | None) -> tuple:
    if profile is None:
        return ()
    return (
        profile.is_subagent,
        tuple(profile.allowed_tools or ()),
        tuple(profile.disallowed_tools or ()),
        tuple(settings.AGENT_TOOL_DENYLIST) if profile.is_subagent else (),
    )


def profile_caches(profile: AgentProfile | None) -> bool:
    """The profile's prompt caching: its own "on" / "off", else the deployment's PROMPT_CACHE."""
    choice = getattr(profile, "prompt_cache", "") if profile else ""
    return choice == "on" if choice else bool(settings.PROMPT_CACHE)


def agent_settings(profile: AgentProfile | None = None, **overrides: Any) -> AgentSettings:
    """Engine settings for a profile; empty profile fields fall back to Django settings.

    The profile's wire style is `wire` (`wire=` overrides it with any registered style's name); a
    style that takes a server-side search tool ("server") gets the deployment's
    ANTHROPIC_SERVER_SEARCH_TOOL. The wire request's max_tokens is AGENT_MAX_TOKENS. Raises ValueError
    for settings the engine does not run (an unknown wire style or server-side variant, a bad mode).
    """
    values: dict[str, Any] = {
        "mode": (profile.tool_search_mode if profile else "") or settings.ENABLE_TOOL_SEARCH,
        "wire": profile.wire_style if profile else NATIVE_STYLE,
        "backend": (profile.search_backend if profile else "") or settings.TOOLSEARCH_DEFAULT_BACKEND,
        "max_results": profile.max_results if profile else 5,
        "announcement_style": profile.announcement_style if profile else "full",
        "announcement_layout": profile.announcement_layout if profile else "flat",
        "announcement_budget": profile.announcement_budget if profile else 0,
        "model": (profile.model if profile else "") or settings.DEFAULT_MODEL,
        "context_window": settings.CONTEXT_WINDOW_TOKENS,
        "base_url": settings.ANTHROPIC_BASE_URL,
        "system_prompt": profile.system_prompt if profile else "",
        "unsupported_model_patterns": tuple(settings.TOOL_SEARCH_UNSUPPORTED_MODELS),
        "prompt_cache": profile_caches(profile),
        "prompt_cache_ttl": (getattr(profile, "prompt_cache_ttl", "") if profile else "") or settings.PROMPT_CACHE_TTL,
    }
    values.update({k: v for k, v in overrides.items() if v not in (None, "")})
    takes_variant = bool(wire_style(values["wire"]).server_search_variants)  # an unknown style fails here, with its name
    values["server_search"] = settings.ANTHROPIC_SERVER_SEARCH_TOOL if takes_variant else ""
    values.setdefault("max_tokens", settings.AGENT_MAX_TOKENS)
    return AgentSettings(**values)


def subagent_setup(parent_catalog: ToolCatalog, parent_policy: PermissionPolicy, parent_settings: AgentSettings,
                   subagent_type: str) -> tuple[ToolCatalog, PermissionPolicy, AgentSettings, str]:
    """Tools, rules, settings and label for an `Agent` call: a named subagent profile's own (its
    catalog narrowed from the parent's), else the parent's narrowed by the global agent denylist.
    The engine decides both: `resolve_subagent_tools` for the tools, `subagent_policy` for ToolSearch."""
    profile = AgentProfile.objects.filter(name=subagent_type, is_subagent=True).first() if subagent_type else None
    if profile is not None:
        return profile_catalog(profile, parent_catalog), permission_policy(profile), agent_settings(profile), profile.name
    denylist = list(settings.AGENT_TOOL_DENYLIST)
    return (resolve_subagent_tools(parent_catalog, global_denylist=denylist),
            subagent_policy(parent_policy, global_denylist=denylist), parent_settings, subagent_type or "general-purpose")


def plan_turn(catalog: ToolCatalog, policy: PermissionPolicy, agent_settings: AgentSettings,
              state: ConversationState | None = None, *, backend: SearchBackend | None = None,
              filtered: PermissionFilterResult | None = None, learn_from_usage: bool = True) -> TurnPlan:
    """The engine's one entry per turn, with what the database says at this moment: the registry's
    token counter, the MCP servers still connecting, and what past searches taught (the usage log
    the conversations app hands over in `ports`). `backend`: None when this turn answers no
    ToolSearch call (a preview of the request only). `learn_from_usage=False`: leave `usage` unset, for
    a caller that reads the usage log only when a search runs (the gateway's lists and calls)."""
    usage = ports.usage().usage_log() if learn_from_usage else None
    return engine_plan_turn(catalog, policy, agent_settings, state, token_counter=token_counter(), backend=backend,
                            pending_mcp_servers=pending_mcp_servers(), usage=usage, filtered=filtered)


# -- servers, tokens ------------------------------------------------------------------------------
def registered_servers() -> type:
    """The MCP server model, reached through `Tool.server`: the registry reads server names and status
    through its own foreign key, because the MCP app sits above it and must not be imported here."""
    return Tool._meta.get_field("server").related_model


def pending_mcp_servers() -> list[str]:
    """Enabled MCP servers still connecting: a ToolSearch with no match names them."""
    servers = registered_servers()
    return list(
        servers.objects.filter(enabled=True, status=servers.Status.PENDING).order_by("name").values_list("name", flat=True)
    )


def reset_caches() -> None:
    """Forget cached catalogs (tests; a settings change). The kept backends: `backends.reset_caches`."""
    global _catalog_cache
    with _lock:
        _catalog_cache = None
        _filtered_cache.clear()
        _request_filter_cache.clear()


def engine_tools(rows: Iterable[Tool]) -> list[EngineTool]:
    return [tool_to_engine(row) for row in rows]


# -- stored conversation state -------------------------------------------------------------------
def compaction_boundary(stored: dict[str, Any] | None) -> CompactionBoundary | None:
    """A conversation's stored compaction (`CompactionBoundary.to_dict`) as the engine's boundary."""
    return CompactionBoundary.from_dict(stored) if stored else None


def usage_log(pairs: Iterable[tuple[str, str]]) -> UsageLog:
    """Stored (query, tool name) evidence, oldest first, as the log BM25 backends index."""
    return UsageLog.from_pairs(pairs)
