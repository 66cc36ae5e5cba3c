"""Rows → engine objects. The only place the Django side builds engine objects.

Views, tasks and consumers ask this module for a `ToolCatalog`, a `PermissionPolicy`, `AgentSettings`,
a search backend or a token counter; the rules themselves (deferral, permissions, mode decision,
ranking) live in `playground.engine` and are never restated here.

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
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet

from playground.engine.permissions import PermissionFilterResult, PermissionPolicy, PermissionRule
from playground.engine.requests import AgentSettings
from playground.engine.search.backends import backend_from_spec, parse_backend_spec
from playground.engine.search.base import SearchBackend, backend_class
from playground.engine.search.embedding_cache import VectorStore
from playground.engine.search.indexed import IndexedOrFallback
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.semantic import dense_side, use_vector_store
from playground.engine.search.stored import IndexStore, use_index_store
from playground.engine.server_search import engine_wire_style
from playground.engine.subagents import resolve_subagent_tools, subagent_policy
from playground.engine.tokens import CharEstimateCounter, TokenCounter
from playground.engine.tools import Tool as EngineTool
from playground.engine.tools import ToolCatalog, ToolDefinitionError, is_deferred
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.registry import indexing  # a module object: indexing reads catalogs and backends here
from playground.registry.models import AgentProfile
from playground.registry.models import PermissionRule as RuleRow
from playground.registry.models import Tool
from playground.registry.vectors import DatabaseIndexStore, make_store

_FILTERED_CACHE_SIZE = 16

_lock = threading.Lock()
_catalog_cache: tuple[tuple, ToolCatalog] | None = None
_filtered_cache: OrderedDict[tuple, tuple[ToolCatalog, PermissionFilterResult]] = OrderedDict()
_backends: dict[str, SearchBackend] = {}
# Backends with settings typed in the inspector: each holds its own indexes, so only the most
# recently used few are kept (the named backends and the configured default stay).
_tuned_backends: OrderedDict[str, SearchBackend] = OrderedDict()
_TUNED_CACHE_SIZE = 6
# Anyone logged in can type inspector settings: only options a backend declares (`option_names`),
# and none that name a file or a model. A backend that declares none (claude-code, postgres, whose
# `dsn` and `table` reach a database) takes no settings there.
INSPECTOR_REFUSED_OPTIONS = frozenset({"encoder", "cache", "semantic"})
INSPECTOR_SETTINGS_MAX_CHARS = 300
_token_counter: TokenCounter | None = None
_vector_stores: dict[str, VectorStore | None] = {}
_index_store: IndexStore | None = None
# What answers while a catalog's vectors are being built: Claude Code's own scorer (no index to wait for).
_keyword_fallback = ClaudeCodeKeywordBackend()


# -- tools ---------------------------------------------------------------------------------------
def tool_to_engine(row: Tool) -> EngineTool:
    """One row as an engine `Tool` (raises `ToolDefinitionError` for a definition the API rejects)."""
    return _engine_tool(
        name=row.name,
        description=row.description,
        input_schema=row.input_schema,
        search_hint=row.search_hint,
        server=row.server.name if row.server_id else row.server_name,
        should_defer=row.should_defer,
        always_load=row.always_load,
    )


def _engine_tool(*, name: str, description: str, input_schema: Any, search_hint: str, server: str | None,
                 should_defer: bool, always_load: bool) -> EngineTool:
    is_mcp = name.startswith("mcp__")
    return EngineTool(
        name=name,
        description=description or "",
        input_schema=input_schema,
        search_hint=search_hint or "",
        is_mcp=is_mcp,
        server=(server or None) if is_mcp else None,
        should_defer=should_defer,
        always_load=always_load,
    )


def refresh_derived_fields(row: Tool) -> None:
    """Token estimate and deferral from the engine, for `Tool.save` and bulk writes.

    A row whose definition the engine rejects (only possible through the admin or raw SQL: the forms
    and the importer validate) keeps a rough estimate and is treated as not deferred.
    """
    try:
        tool = tool_to_engine(row)
    except ToolDefinitionError:
        row.token_estimate = token_counter().count_tools(
            [{"name": row.name, "description": row.description, "input_schema": row.input_schema}]
        )
        row.deferred = False
        return
    row.token_estimate = token_counter().count_tools([tool.to_api()])
    row.deferred = is_deferred(tool)


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
    return catalog


_CATALOG_FIELDS = ("name", "description", "input_schema", "search_hint", "server_name", "server__name",
                   "should_defer", "always_load", "source")


def _build_catalog(queryset: QuerySet) -> ToolCatalog:
    """One query; plain values rather than model instances (a cold build of 10,000 tools is mostly ORM)."""
    rows = list(queryset.order_by().values(*_CATALOG_FIELDS))
    rows.sort(key=lambda r: (r["source"] != Tool.Source.BUILTIN, r["name"]))
    return ToolCatalog(
        _engine_tool(
            name=r["name"],
            description=r["description"],
            input_schema=r["input_schema"],
            search_hint=r["search_hint"],
            server=r["server__name"] or r["server_name"],
            should_defer=r["should_defer"],
            always_load=r["always_load"],
        )
        for r in rows
    )


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
    key = (
        id(catalog),
        tuple((r.effect, r.pattern, r.scope) for r in policy.rules),
        _profile_signature(profile),
    )
    with _lock:
        hit = _filtered_cache.get(key)
        if hit is not None:
            _filtered_cache.move_to_end(key)
            return hit
    narrowed = profile_catalog(profile, catalog)
    result = (narrowed, policy.filter(narrowed))
    with _lock:
        _filtered_cache[key] = result
        while len(_filtered_cache) > _FILTERED_CACHE_SIZE:
            _filtered_cache.popitem(last=False)
    return result


def _profile_signature(profile: AgentProfile | None) -> tuple:
    if profile is None:
        return ()
    return (
        profile.is_subagent,
        tuple(profile.allowed_tools or ()),
        tuple(profile.disallowed_tools or ()),
        tuple(settings.AGENT_TOOL_DENYLIST) if profile.is_subagent else (),
    )


def agent_settings(profile: AgentProfile | None = None, **overrides: Any) -> AgentSettings:
    """Engine settings for a profile; empty profile fields fall back to Django settings.

    Raises ValueError for settings the engine does not run (e.g. the "server" wire style, which
    belongs to Anthropic's server-side search tool rather than to this engine).
    """
    values: dict[str, Any] = {
        "mode": (profile.tool_search_mode if profile else "") or settings.ENABLE_TOOL_SEARCH,
        "wire_style": profile.wire_style if profile else NATIVE_STYLE,
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
    }
    values.update({k: v for k, v in overrides.items() if v not in (None, "")})
    return AgentSettings(**values)


def planned_wire_style(wire_style: str) -> tuple[str, str]:
    """(the wire style the engine plans with, Anthropic's server-side search variant or "") for a
    profile's wire style; the "server" style takes the deployment's ANTHROPIC_SERVER_SEARCH_TOOL."""
    return engine_wire_style(wire_style, settings.ANTHROPIC_SERVER_SEARCH_TOOL)


# -- backends, servers, tokens -------------------------------------------------------------------
def backend_names() -> list[str]:
    return list(settings.TOOLSEARCH_BACKENDS)


def search_backend(name: str | None = None) -> SearchBackend:
    """One backend instance per name per process (backends cache their index by catalog fingerprint).
    A name may carry settings (`hybrid:piece_vectors="pooled"`, see `parse_backend_spec`), so a
    deployment can set TOOLSEARCH_DEFAULT_BACKEND to a tuned backend without new code."""
    resolved = name if name and name != "default" else settings.TOOLSEARCH_DEFAULT_BACKEND
    if ":" in resolved and resolved != settings.TOOLSEARCH_DEFAULT_BACKEND:
        # A profile's tuned backend: each edit makes a new spec, so these share the bounded cache.
        return tuned_search_backend(resolved)
    with _lock:
        backend = _backends.get(resolved)
    if backend is None:
        backend = _prepared(backend_from_spec(resolved, registry=dict(settings.TOOLSEARCH_BACKENDS)), resolved)
        with _lock:
            backend = _backends.setdefault(resolved, backend)
    return backend


def tuned_backend_spec(name: str, settings_text: str) -> str:
    """`name` with inspector settings (`aspect_weight=0:intent_weight=0.5`) as one backend spec.

    Raises ValueError, with a message for the page, for text that is not key=value pairs, an
    option the backend does not declare, the options that name files or models, and a value that
    is not a number, true/false, a short word or an object of those (`field_weights={"name": 2}`,
    `bm25={"k1": 1.5}`). A value of the wrong type for its option is caught when the backend is
    made (`checked_backend_spec`).
    """
    text = settings_text.strip()
    if not text:
        return name
    if len(text) > INSPECTOR_SETTINGS_MAX_CHARS:
        raise ValueError(f"settings are limited to {INSPECTOR_SETTINGS_MAX_CHARS} characters")
    base = name if name and name != "default" else settings.TOOLSEARCH_DEFAULT_BACKEND
    spec = f"{base}:{text}"
    base_name, options = parse_backend_spec(spec)
    allowed = _inspector_options(backend_class(base_name, dict(settings.TOOLSEARCH_BACKENDS)))
    if not allowed:
        raise ValueError(f"backend {base_name!r} takes no settings in the inspector")
    for key in options:
        if key not in allowed and key not in INSPECTOR_REFUSED_OPTIONS:
            raise ValueError(f"unknown option {key!r} for backend {base_name!r} (settings: {', '.join(sorted(allowed))})")
    _check_inspector_options(options)
    return spec


def _inspector_options(cls: type[SearchBackend]) -> frozenset[str]:
    return frozenset(cls.option_names or ()) - INSPECTOR_REFUSED_OPTIONS


def _check_inspector_options(options: dict[str, Any], depth: int = 0) -> None:
    for key, value in options.items():
        if key in INSPECTOR_REFUSED_OPTIONS:
            raise ValueError(f"option {key!r} cannot be set in the inspector (it names a file or a model); "
                             "set it in TOOLSEARCH_DEFAULT_BACKEND or on the CLI")
        if isinstance(value, dict) and depth == 0:
            _check_inspector_options(value, depth + 1)
        elif not (isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 40)):
            raise ValueError(f"option {key}: give a number, true/false or a short word, not {json.dumps(value)}")


def tuned_search_backend(spec: str) -> SearchBackend:
    """A backend for a spec with inspector settings; unknown options raise ValueError (the engine's)."""
    with _lock:
        backend = _tuned_backends.get(spec)
        if backend is not None:
            _tuned_backends.move_to_end(spec)
            return backend
    backend = _make_tuned(spec)
    with _lock:
        backend = _tuned_backends.setdefault(spec, backend)
        _tuned_backends.move_to_end(spec)
        while len(_tuned_backends) > _TUNED_CACHE_SIZE:
            _tuned_backends.popitem(last=False)
    return backend


def checked_backend_spec(name: str, settings_text: str) -> str:
    """`tuned_backend_spec`, with the backend made once, so that a value of the wrong type is an
    error where the settings are typed (a form), not later in a run or a conversation."""
    spec = tuned_backend_spec(name, settings_text)
    if spec != name:
        _make_tuned(spec)
    return spec


def _make_tuned(spec: str) -> SearchBackend:
    try:
        return _prepared(backend_from_spec(spec, registry=dict(settings.TOOLSEARCH_BACKENDS)), spec)
    except (TypeError, ValueError) as exc:  # a value of the wrong type: the option's own check names it
        raise ValueError(f"{spec}: {exc}") from exc


def vector_store() -> VectorStore | None:
    """This process's store of tool vectors (TOOLSEARCH_VECTOR_STORE; None: the engine's file)."""
    kind = settings.TOOLSEARCH_VECTOR_STORE
    with _lock:
        if kind not in _vector_stores:
            _vector_stores[kind] = make_store(kind)
        return _vector_stores[kind]


def index_store() -> IndexStore | None:
    """Where prebuilt search indexes are loaded from: the database, when vectors are built in the
    background (the same build stores the indexes); None (always build) otherwise."""
    global _index_store
    if not indexing.builds_in_background():
        return None
    with _lock:
        if _index_store is None:
            _index_store = DatabaseIndexStore()
        return _index_store


def _prepared(backend: SearchBackend, spec: str) -> SearchBackend:
    """The backend with its dense side (if any) reading and writing the configured vector store,
    and — when vectors are built in the background — wrapped so that a search never encodes a
    catalog in the request (`IndexedOrFallback`: the last complete index or the keyword backend
    answers while the build runs, and the result says so)."""
    store = vector_store()
    if store is not None:
        use_vector_store(backend, store)
    use_index_store(backend, index_store())
    if dense_side(backend) is None or not indexing.builds_in_background():
        return backend
    return IndexedOrFallback(
        backend,
        _keyword_fallback,
        inline_limit=settings.TOOLSEARCH_INLINE_EMBED_LIMIT,
        on_missing=lambda: indexing.schedule_index_build("" if spec == settings.TOOLSEARCH_DEFAULT_BACKEND else spec),
        describe_build=indexing.progress_note,
    )


def backend_option_names(backend: SearchBackend) -> list[str]:
    """The settings the inspector accepts for this backend (empty: it has none)."""
    return sorted(_inspector_options(type(getattr(backend, "inner", backend))))


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


def token_counter() -> TokenCounter:
    """The estimate used for registry numbers: deterministic and offline (chars ÷ 2.5)."""
    global _token_counter
    if _token_counter is None:
        _token_counter = CharEstimateCounter()
    return _token_counter


def reset_caches() -> None:
    """Forget cached catalogs and backends (tests; a settings change)."""
    global _catalog_cache
    with _lock:
        _catalog_cache = None
        _filtered_cache.clear()
        _backends.clear()
        _tuned_backends.clear()


def engine_tools(rows: Iterable[Tool]) -> list[EngineTool]:
    return [tool_to_engine(row) for row in rows]
