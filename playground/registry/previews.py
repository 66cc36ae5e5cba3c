"""What the engine would do for a profile: a ToolSearch call (inspector) and the request it would
build (model view, permissions preview, profile detail). Engine calls only; no rule is restated."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


from playground.engine.modes import ModeDecision
from playground.engine.permissions import PermissionDecision
from playground.engine.requests import AgentSettings, ConversationState, RequestPlan
from playground.engine.search.base import ToolSearchResult, check_query_size
from playground.engine.server_search import SERVER_SEARCH_TOOLS, SERVER_STYLE, server_search_request, server_search_tool
from playground.engine.turn import plan_turn
from playground.engine.toolsearch_tool import (
    NATIVE_STYLE,
    TOOL_SEARCH_TOOL,
    ToolSearchInputError,
    run_tool_search,
    tool_search_user_blocks,
)
from playground.registry import adapter, ports
from playground.registry.models import AgentProfile

EXCLUDED_SHOWN = 100
SERVER_SEARCH_NAMES = frozenset(t["name"] for t in SERVER_SEARCH_TOOLS.values())
PREVIEW_TOOL_USE_ID = "toolu_preview_discovery"
INSPECTOR_TOOL_USE_ID = "toolu_inspector"


@dataclass
class InspectorAnswer:
    query: str
    backend: str
    wire_style: str
    max_results: int
    result: ToolSearchResult | None = None
    error: str = ""
    content: list[dict[str, Any]] = field(default_factory=list)  # the user-message blocks the model receives
    max_score: float = 0.0
    excluded_matches: list[tuple[str, PermissionDecision]] = field(default_factory=list)
    excluded: list[tuple[str, PermissionDecision]] = field(default_factory=list)
    excluded_total: int = 0
    searchable_count: int = 0
    deferred_count: int = 0
    decision: ModeDecision | None = None
    ask: frozenset[str] = frozenset()  # permitted, but each call needs a person's confirmation
    note: str = ""  # how the answer differs from what the profile runs (the "server" wire style)
    query_notes: list[str] = field(default_factory=list)  # the backend's own reading (hybrid: sentences, clauses)
    backend_options: list[str] = field(default_factory=list)  # the settings the inspector accepts for it
    # Learning from usage (conversations/usage.py, through registry/ports.py): what the log holds, and whether this backend reads it.
    learning_enabled: bool = False
    usage_entries: int = 0
    usage_tools: int = 0
    backend_learns: bool = False

    @property
    def content_json(self) -> str:
        return json.dumps(self.content, indent=2, ensure_ascii=False)

    @property
    def output_json(self) -> str:
        return json.dumps(self.result.to_output() if self.result else {}, indent=2, ensure_ascii=False)


def inspect_query(
    query: str,
    profile: AgentProfile | None = None,
    *,
    backend: str = "",
    max_results: int | None = None,
    wire_style: str = "",
    mode: str = "",
    backend_settings: str = "",
) -> InspectorAnswer:
    """Run ToolSearch as the model would for this profile, plus what permissions kept out of reach
    and whether the mode decision would offer ToolSearch at all. `backend_settings`
    (`aspect_weight=0:intent_weight=0.5`) tunes the backend for this search only; bad settings raise
    ValueError with a message for the page, and so does a query over the size limits."""
    check_query_size(query)
    backend_name = backend or (profile.search_backend if profile else "") or ""
    if backend_settings.strip():
        search_backend = adapter.tuned_search_backend(adapter.tuned_backend_spec(backend_name, backend_settings))
    else:
        search_backend = adapter.search_backend(backend_name)
    max_results = max_results or (profile.max_results if profile else 5)
    note = ""
    if (wire_style or (profile.wire_style if profile else "")) == SERVER_STYLE:
        # Anthropic's own search tool answers such profiles, so there is no ToolSearch of ours to mirror;
        # the inspector still shows our ranking, as the native style would get it.
        note = (f"This profile uses Anthropic's server-side search tool, so the model never calls our ToolSearch. "
                f"Shown: our ranking with {'the profile' if profile and profile.search_backend else 'the default'} "
                f"search backend, as the native wire style would receive it.")
        wire_style = NATIVE_STYLE
    settings = adapter.agent_settings(profile, mode=mode, wire_style=wire_style)
    wire_style = settings.wire_style
    policy = adapter.permission_policy(profile)
    unfiltered, filtered = adapter.filtered_catalog(profile, policy=policy)
    usage = ports.usage().usage_log()
    turn = plan_turn(
        unfiltered, policy, settings, token_counter=adapter.token_counter(), backend=search_backend, usage=usage,
        pending_mcp_servers=adapter.pending_mcp_servers(), filtered=filtered,
    )
    answer = InspectorAnswer(
        query=query,
        backend=search_backend.name,
        wire_style=wire_style,
        max_results=max_results,
        excluded=filtered.excluded[:EXCLUDED_SHOWN],
        excluded_total=len(filtered.excluded),
        searchable_count=len(filtered.permitted),
        deferred_count=len(filtered.permitted.deferred),
        decision=turn.decision,
        ask=frozenset(filtered.ask),
        note=note,
        backend_options=adapter.backend_option_names(search_backend),
    )
    answer.learning_enabled = ports.usage().learning_enabled()
    answer.backend_learns = search_backend.reads_usage
    if usage:
        answer.usage_entries = usage.entries
        answer.usage_tools = usage.tools
    if not query.strip():
        return answer
    arguments = {"query": query, "max_results": max_results}
    try:
        # The permitted tools whatever the mode: the inspector shows what a search would find.
        answer.result = turn.run_tool_search(arguments, over=turn.permitted)
    except ToolSearchInputError as exc:
        answer.error = str(exc)
        return answer
    answer.content = tool_search_user_blocks(INSPECTOR_TOOL_USE_ID, answer.result, wire_style)
    answer.query_notes = search_backend.describe_query(query) if answer.result.reading.kind == "keyword" else []
    answer.max_score = max((s.score for s in answer.result.scored), default=0.0)
    if filtered.excluded:
        # The same search over the unfiltered tools: which hits did permissions take away?
        decisions = dict(filtered.excluded)
        unfiltered_result = turn.run_tool_search(arguments, over=unfiltered)
        answer.excluded_matches = [(name, decisions[name]) for name in unfiltered_result.matches if name in decisions]
    return answer


@dataclass
class ModelPreview:
    profile: AgentProfile | None
    plan: RequestPlan
    discovered_requested: list[str]
    unknown_discovered: list[str]
    # The wire request: the plan's, or for the "server" style the conversations loop's rewrite of it.
    request: dict[str, Any] = field(default_factory=dict)
    server_search: str = ""  # "bm25" / "regex" when Anthropic's server-side search replaces ToolSearch

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.request.get("tools", [])

    @property
    def loaded_tools(self) -> list[dict[str, Any]]:
        """Tools the model sees in full (the server search tool and defer_loading stubs excluded)."""
        return [t for t in self.tools if not t.get("defer_loading") and t.get("name") not in SERVER_SEARCH_NAMES]

    @property
    def defer_loading_tools(self) -> list[dict[str, Any]]:
        return [t for t in self.tools if t.get("defer_loading")]

    @property
    def server_search_tool(self) -> dict[str, Any] | None:
        return next((t for t in self.tools if t.get("name") in SERVER_SEARCH_NAMES), None)

    @property
    def server_search_tool_json(self) -> str:
        return json.dumps(self.server_search_tool, indent=2)

    @property
    def api_kwargs_json(self) -> str:
        return json.dumps(self.request, indent=2, ensure_ascii=False, default=str)

    @property
    def tools_json(self) -> str:
        return json.dumps(self.tools, indent=2, ensure_ascii=False)


@dataclass
class ProfileSettings:
    """What a profile runs with: the engine's settings, plus Anthropic's server-side search variant for
    the "server" wire style (the engine then plans as for native, as the conversations loop does)."""

    agent: AgentSettings
    server_search: str = ""

    @property
    def wire_style_label(self) -> str:
        if self.server_search:
            return f"{SERVER_STYLE} ({server_search_tool(self.server_search)['type']})"
        return self.agent.wire_style


def profile_settings(profile: AgentProfile | None, *, mode: str = "", wire_style: str = "") -> ProfileSettings:
    """Raises ValueError for settings nothing can run (an unknown wire style, a bad mode or variant)."""
    planned, variant = adapter.planned_wire_style(wire_style or (profile.wire_style if profile else ""))
    return ProfileSettings(adapter.agent_settings(profile, mode=mode, wire_style=planned), server_search=variant)


def discovery_state(discovered: Sequence[str], catalog, wire_style: str) -> ConversationState:
    """A conversation in which the model already found `discovered` with one `select:` ToolSearch call.

    The engine recovers discovered tools from history, so the preview builds the history that would
    have produced them rather than passing a list the engine never sees in real runs.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What the model sees (preview)."}]
    if discovered:
        query = "select:" + ",".join(discovered)
        result = run_tool_search({"query": query}, catalog, adapter.search_backend(""))
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": PREVIEW_TOOL_USE_ID, "name": TOOL_SEARCH_TOOL.name, "input": {"query": query}}],
            },
            {"role": "user", "content": tool_search_user_blocks(PREVIEW_TOOL_USE_ID, result, wire_style)},
        ]
    return ConversationState(messages=messages)


def model_preview(
    profile: AgentProfile | None,
    discovered: Sequence[str] = (),
    *,
    mode: str = "",
    wire_style: str = "",
) -> ModelPreview:
    resolved = profile_settings(profile, mode=mode, wire_style=wire_style)
    settings = resolved.agent
    catalog = adapter.profile_catalog(profile)
    known = [name for name in discovered if name in catalog]
    unknown = [name for name in discovered if name not in catalog]
    state = discovery_state(known, catalog, settings.wire_style)
    plan = plan_turn(
        catalog,
        adapter.permission_policy(profile),
        settings,
        state,
        token_counter=adapter.token_counter(),
        pending_mcp_servers=adapter.pending_mcp_servers(),
    ).request
    request = dict(plan.to_api_kwargs())
    if resolved.server_search:
        # The loop's own rewrite (playground.engine.server_search), not a second copy of it.
        request = server_search_request(request, plan, resolved.server_search)
    return ModelPreview(profile=profile, plan=plan, discovered_requested=list(discovered), unknown_discovered=unknown,
                        request=request, server_search=resolved.server_search if plan.decision.enabled else "")
