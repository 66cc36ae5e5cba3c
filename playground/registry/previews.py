"""What the engine would do for a profile: a ToolSearch call (inspector) and the request it would
build (model view, permissions preview, profile detail). Engine calls only; no rule is restated."""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


from playground.engine.cache_cost import first_and_steady
from playground.engine.modes import ModeDecision
from playground.engine.permissions import PermissionDecision
from playground.engine.announcements import Announcement
from playground.engine.requests import AgentSettings, ConversationState, RequestPlan
from playground.engine.search.base import SearchBackend, ToolSearchResult
from playground.engine.search.query import check_query_size
from playground.engine.search.equivalence import SameOperationGroup, groups_in_results
from playground.engine.toolsearch_tool import (
    ToolSearchInputError,
    run_tool_search,
)
from playground.engine.wires.anthropic_server import SERVER_SEARCH_TOOLS, server_search_tool
from playground.engine.wires.base import WireStyle
from playground.engine.wires.registry import wire_style
from playground.registry import adapter, backends, inspector_options, ports
from playground.registry.models import AgentProfile
from playground.registry.prices import current_price_table

EXCLUDED_SHOWN = 100
SERVER_SEARCH_NAMES = frozenset(t["name"] for t in SERVER_SEARCH_TOOLS.values())
PREVIEW_TOOL_USE_ID = "toolu_preview_discovery"
INSPECTOR_TOOL_USE_ID = "toolu_inspector"
# Comparing backends: a tool whose ranks in two backends differ by more than this is marked.
RANK_GAP = 2

logger = logging.getLogger(__name__)


@dataclass
class ComparedRow:
    """One rank of one backend's column, with where the other backends put the same tool."""

    rank: int
    name: str
    score: float | None  # None: the reading ranks without scores (select:, an exact name, a prefix)
    normalised: float | None  # score / this backend's top score, 0-1
    disagreements: list[str] = field(default_factory=list)  # "bm25: #6", "claude-code: not in its top 5"


@dataclass
class BackendColumn:
    """One backend's answer to the compared query; an error stays in its column."""

    backend: str
    result: ToolSearchResult | None = None
    error: str = ""
    max_score: float = 0.0
    learns: bool = False
    query_notes: list[str] = field(default_factory=list)
    rows: list[ComparedRow] = field(default_factory=list)
    search_backend: SearchBackend | None = field(default=None, repr=False)  # None: it could not be made

    @property
    def ranks(self) -> dict[str, int]:
        return {name: rank for rank, name in enumerate(self.result.matches, 1)} if self.result else {}


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
    deferred_count: int = 0  # deferred on this turn (0 when the mode is off)
    searched_count: int = 0  # the permitted tools a search goes over: those deferred when the mode is on
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
    # Two or more backends side by side (empty: the single view above).
    columns: list[BackendColumn] = field(default_factory=list)
    rank_gap: int = RANK_GAP
    shared: list[str] = field(default_factory=list)  # tools in every answering backend's top max_results
    # Results that have same-operation tools on other servers (engine/search/equivalence.py).
    same_operation: list[SameOperationGroup] = field(default_factory=list)

    @property
    def answering(self) -> list[BackendColumn]:
        return [c for c in self.columns if c.result is not None]

    @property
    def rank_rows(self) -> list[tuple[int, list[ComparedRow | None]]]:
        """The columns lined up by rank: (rank, each column's row at that rank or None)."""
        depth = max((len(c.rows) for c in self.columns), default=0)
        return [(rank, [c.rows[rank - 1] if rank <= len(c.rows) else None for c in self.columns])
                for rank in range(1, depth + 1)]

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
    compare: Sequence[tuple[str, str]] = (),
    rank_gap: int = RANK_GAP,
) -> InspectorAnswer:
    """Run ToolSearch as the model would for this profile, plus what permissions kept out of reach
    and whether the mode decision would offer ToolSearch at all. `backend_settings`
    (`aspect_weight=0:intent_weight=0.5`) tunes the backend for this search only; bad settings raise
    ValueError with a message for the page, and so does a query over the size limits.

    `compare`: more backends to run beside this one, each (name, why it cannot run here or "");
    when any differs from this one the answer has one column per backend instead of the single view."""
    check_query_size(query)
    backend_name = backend or (profile.search_backend if profile else "") or ""
    search_backend = inspector_options.tuned_search_backend(backend_name, backend_settings)
    max_results = max_results or (profile.max_results if profile else 5)
    note = ""
    settings = adapter.agent_settings(profile, mode=mode, wire=wire_style)
    if settings.server_search:
        # Anthropic's own search tool answers such profiles, so there is no ToolSearch of ours to mirror;
        # the inspector still shows our ranking, as the native style (the one the turn is planned in) gets it.
        note = (f"This profile uses Anthropic's server-side search tool, so the model never calls our ToolSearch. "
                f"Shown: our ranking with {'the profile' if profile and profile.search_backend else 'the default'} "
                f"search backend, as the native wire style would receive it.")
    wire_style = settings.planned_as  # the shape our ToolSearch's answer takes (a server profile: native)
    policy = adapter.permission_policy(profile)
    unfiltered, filtered = adapter.filtered_catalog(profile, policy=policy)
    turn = adapter.plan_turn(unfiltered, policy, settings, backend=search_backend, filtered=filtered)
    usage = turn.usage
    answer = InspectorAnswer(
        query=query,
        backend=search_backend.name,
        wire_style=wire_style,
        max_results=max_results,
        excluded=filtered.excluded[:EXCLUDED_SHOWN],
        excluded_total=len(filtered.excluded),
        searchable_count=len(filtered.permitted),
        # What the turn defers: nothing when the mode is off (every permitted tool goes in full);
        # the search below still runs over the tools that would be deferred.
        deferred_count=len(filtered.permitted.deferred) if turn.decision.enabled else 0,
        searched_count=len(filtered.permitted.deferred),
        decision=turn.decision,
        ask=frozenset(filtered.ask),
        note=note,
        backend_options=inspector_options.backend_option_names(search_backend),
    )
    answer.learning_enabled = ports.usage().learning_enabled()
    answer.backend_learns = search_backend.reads_usage
    if usage:
        answer.usage_entries = usage.entries
        answer.usage_tools = usage.tools
    others = _other_backends(compare, search_backend)
    if others:
        answer.columns = [_column(search_backend, ""), *others]
    if not query.strip():
        return answer
    arguments = {"query": query, "max_results": max_results}
    if answer.columns:
        _compare(answer, turn, arguments, rank_gap)
        return answer
    try:
        # The permitted tools whatever the mode: the inspector shows what a search would find.
        answer.result = turn.run_tool_search(arguments, over=turn.permitted)
    except ToolSearchInputError as exc:
        answer.error = str(exc)
        return answer
    answer.content = turn.style.search_answer(INSPECTOR_TOOL_USE_ID, answer.result)
    answer.query_notes = search_backend.describe_query(query) if answer.result.reading.kind == "keyword" else []
    answer.max_score = max((s.score for s in answer.result.scored), default=0.0)
    answer.same_operation = groups_in_results(turn.permitted, answer.result.matches, backends.index_store())
    if filtered.excluded:
        # The same search over the unfiltered tools: which hits did permissions take away?
        decisions = dict(filtered.excluded)
        unfiltered_result = turn.run_tool_search(arguments, over=unfiltered)
        answer.excluded_matches = [(name, decisions[name]) for name in unfiltered_result.matches if name in decisions]
    return answer


def _column(backend: SearchBackend | None, error: str, name: str = "") -> BackendColumn:
    if backend is None:
        return BackendColumn(backend=name[:60], error=error)  # a name typed into the URL, shown as its column's head
    return BackendColumn(backend=backend.name, error=error, learns=backend.reads_usage, search_backend=backend)


def _other_backends(compare: Sequence[tuple[str, str]], first: SearchBackend) -> list[BackendColumn]:
    """Columns for the compared backends other than `first`, once each; one that cannot run is a
    column with its reason."""
    columns: list[BackendColumn] = []
    seen = {first.name}
    for name, refused in compare:
        if refused:
            backend, error = None, refused
        else:
            try:
                backend, error = backends.search_backend(name), ""
            except (ValueError, ImportError) as exc:  # a backend that cannot be made here
                backend, error = None, f"{name}: {exc}"
        key = backend.name if backend else name
        if key not in seen:
            seen.add(key)
            columns.append(_column(backend, error, name))
    return columns


def _compare(answer: InspectorAnswer, turn, arguments: dict[str, Any], rank_gap: int) -> None:
    """Each column's search through the turn (its permissions, usage log and pending servers), then
    the ranks lined up: where another backend put each tool, marked when it is far or absent."""
    answer.rank_gap = rank_gap
    for column in answer.columns:
        if column.error:
            continue
        try:
            column.result = turn.run_tool_search(arguments, over=turn.permitted, backend=column.search_backend)
            if column.result.reading.kind == "keyword":
                column.query_notes = column.search_backend.describe_query(arguments["query"])
        except ToolSearchInputError as exc:
            column.error = str(exc)
            continue
        except Exception as exc:  # one backend failing (a database away, a model missing) must not take the page
            logger.exception("inspector: backend %s failed on %r", column.backend, arguments["query"][:200])
            column.result, column.query_notes = None, []
            column.error = f"{column.backend} failed: {type(exc).__name__}: {exc}"
            continue
        column.max_score = max((s.score for s in column.result.scored), default=0.0)
    answering = answer.answering
    ranks = {c.backend: c.ranks for c in answering}
    top = answer.max_results
    for column in answering:
        scores = {s.name: s.score for s in column.result.scored}
        for rank, name in enumerate(column.result.matches, 1):
            score = scores.get(name)
            row = ComparedRow(rank=rank, name=name, score=score,
                              normalised=score / column.max_score if score is not None and column.max_score > 0 else None)
            for other in answering:
                if other is column:
                    continue
                other_rank = ranks[other.backend].get(name)
                if other_rank is None:
                    row.disagreements.append(f"{other.backend}: not in its top {top}")
                elif abs(other_rank - rank) > rank_gap:
                    row.disagreements.append(f"{other.backend}: #{other_rank}")
            column.rows.append(row)
    if len(answering) > 1:
        shared = set.intersection(*(set(ranks[c.backend]) for c in answering))
        answer.shared = [name for name in answering[0].result.matches if name in shared]


@dataclass
class ModelPreview:
    profile: AgentProfile | None
    plan: RequestPlan
    discovered_requested: list[str]
    unknown_discovered: list[str]
    # The wire request, as the conversations loop sends it (`TurnPlan.wire_request`).
    request: dict[str, Any] = field(default_factory=dict)
    server_search: str = ""  # "bm25" / "regex" when Anthropic's server-side search replaces ToolSearch
    # The turn's token accounting for the request on the wire (`TurnPlan.wire_tokens`: one for both vendors).
    tokens: Any = None
    # The request and its all-tools baseline as a first request and in the steady state, split by the
    # prompt cache model and priced (`cache_cost.first_and_steady`).
    cache: dict[str, Any] = field(default_factory=dict)
    # The announcement as far as the wire sends it (`TurnPlan.wire_announcement`: none in OpenAI's hosted style).
    announcement: Announcement | None = None
    # What the harness changes before the turn (`TurnPlan.tool_changes`: the tool-changes style's
    # prediction from the person's message, and its removals), or None.
    tool_changes: Any = None
    # The turn's tools as its request offers them (`TurnPlan.tool_names` / `discovered_tools` /
    # `deferred_tools`: the plan's, with the tools this turn's tool_addition adds).
    tool_names: list[str] = field(default_factory=list)
    discovered_tools: list[str] = field(default_factory=list)
    deferred_tools: list[str] = field(default_factory=list)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.request.get("tools", [])

    @property
    def sent_tools(self) -> list[dict[str, Any]]:
        """The request's tools as listed on the page: each by its name on the wire (a Chat Completions
        function's, or the type of a nameless one such as OpenAI's `tool_search`), a namespace with
        the functions it carries, and which of those go with defer_loading."""
        rows = []
        for tool in self.tools:
            name = tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type", "")
            functions = [{"name": f.get("name", ""), "deferred": bool(f.get("defer_loading"))} for f in tool.get("tools", [])]
            rows.append({"name": name, "deferred": bool(tool.get("defer_loading")), "functions": functions})
        return rows

    @property
    def system(self) -> str:
        """The system prompt the request carries, as sent (not the plan's: tool changes without
        ToolSearch leave its announcement out): a Responses body's `instructions`, the Messages API's
        `system` (text, or text blocks once cache breakpoints are set), a Chat body's system message;
        none of them: none."""
        if "input" in self.request:
            return str(self.request.get("instructions") or "")
        if "system" in self.request:
            system = self.request["system"]
            return "\n\n".join(block.get("text", "") for block in system) if isinstance(system, list) else str(system)
        first = (self.request.get("messages") or [{}])[0]
        return first["content"] if first.get("role") == "system" and isinstance(first.get("content"), str) else ""

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
    def api_name(self) -> str:
        """Which API the request is for (its body says: OpenAI's have `input` or `max_completion_tokens`)."""
        if "input" in self.request:
            return "OpenAI Responses API body"
        if "max_completion_tokens" in self.request:
            return "OpenAI Chat Completions body"
        return "Messages API keyword arguments"

    @property
    def api_kwargs_json(self) -> str:
        return json.dumps(self.request, indent=2, ensure_ascii=False, default=str)

    @property
    def tools_json(self) -> str:
        return json.dumps(self.tools, indent=2, ensure_ascii=False)


@dataclass
class ProfileSettings:
    """What a profile runs with: the engine's settings (for the "server" wire style, planned as native
    with Anthropic's server-side search variant in `agent.server_search`, as the conversations loop runs it)."""

    agent: AgentSettings

    @property
    def server_search(self) -> str:
        return self.agent.server_search

    @property
    def predicts_tools(self) -> bool:
        """A style whose harness changes the history before each turn (`WireStyle.tool_changes`: tool
        changes' prediction): the profile's k, threshold and ToolSearch choice apply to it."""
        return type(wire_style(self.agent.wire)).tool_changes is not WireStyle.tool_changes

    @property
    def wire_style_label(self) -> str:
        if self.server_search:
            return f"{self.agent.wire} ({server_search_tool(self.server_search)['type']})"
        return self.agent.wire


def profile_settings(profile: AgentProfile | None, *, mode: str = "", wire_style: str = "") -> ProfileSettings:
    """Raises ValueError for settings nothing can run (an unknown wire style, a bad mode or variant)."""
    return ProfileSettings(adapter.agent_settings(profile, mode=mode, wire=wire_style))


MAX_PREVIEW_MESSAGE_CHARS = 2000


def discovery_state(discovered: Sequence[str], catalog, settings: AgentSettings, message: str = "") -> ConversationState:
    """A conversation in which the model already found `discovered` with one `select:` search.

    The engine recovers discovered tools from history, so the preview builds the history that would
    have produced them rather than passing a list the engine never sees in real runs: the history the
    wire style itself leaves after such a search (`WireStyle.discovery_messages`).
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What the model sees (preview)."}]
    if discovered:
        arguments = {"query": "select:" + ",".join(discovered)}
        result = run_tool_search(arguments, catalog, backends.search_backend(""))
        messages += wire_style(settings.wire).discovery_messages(PREVIEW_TOOL_USE_ID, arguments, result, definitions=catalog.get,
                                                                  server_search=settings.server_search)
    if message:  # the person's next message: the tool-changes style predicts from it
        if len(messages) > 1:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
            messages.append({"role": "user", "content": message})
        else:
            messages = [{"role": "user", "content": message}]
    return ConversationState(messages=messages)


def model_preview(
    profile: AgentProfile | None,
    discovered: Sequence[str] = (),
    *,
    mode: str = "",
    wire_style: str = "",
    message: str = "",
) -> ModelPreview:
    settings = profile_settings(profile, mode=mode, wire_style=wire_style).agent  # any registered style: OpenAI's too
    catalog = adapter.profile_catalog(profile)
    known = [name for name in discovered if name in catalog]
    unknown = [name for name in discovered if name not in catalog]
    if len(message) > MAX_PREVIEW_MESSAGE_CHARS:
        raise ValueError(f"the message is longer than {MAX_PREVIEW_MESSAGE_CHARS} characters")
    state = discovery_state(known, catalog, settings, message.strip())
    # A backend only where the wire style ranks the message before the turn (no search runs otherwise).
    backend = backends.search_backend(settings.backend) if message.strip() else None
    turn = adapter.plan_turn(catalog, adapter.permission_policy(profile), settings, state, backend=backend)
    plan = turn.request
    table = current_price_table()
    return ModelPreview(profile=profile, plan=plan, discovered_requested=list(discovered), unknown_discovered=unknown,
                        request=turn.wire_request(), server_search=settings.server_search if plan.decision.enabled else "",
                        tokens=turn.wire_tokens, cache=first_and_steady(turn, table), announcement=turn.wire_announcement,
                        tool_changes=turn.tool_changes, tool_names=turn.tool_names,
                        discovered_tools=turn.discovered_tools, deferred_tools=turn.deferred_tools)
