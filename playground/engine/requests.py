"""Building one model request: which tools go in full, which are deferred, and why.

Order, every turn: permission filter → deferral → discovered tools → request tools.
1. Permissions remove denied tools before anything else: a denied tool is never sent, announced
   or searchable. (ToolSearch itself can be denied: then tool search is off.)
2. Deferral (`tools.is_deferred`) splits the permitted tools into loaded and deferred.
3. The mode decision (`modes.decide_mode`) says whether deferral applies this turn.
4. Discovered tools are read from the history (plus the compaction boundary's carried set), kept
   only if they are still permitted and deferred.
5. Request tools:
   - on, native: loaded tools, ToolSearch, then discovered tools with `defer_loading: true` (those
     with no tool_reference left in the history go as ordinary tools, see below); the history's
     tool_reference blocks to tools not sent are dropped;
   - on, client: loaded tools, ToolSearch, then discovered tools as ordinary tools; tool_reference
     blocks (from an earlier native turn) become text markers;
   - off: every permitted tool, no ToolSearch; tool_reference blocks become text markers.
Invariants (property-tested): an undiscovered deferred tool is never sent; a denied tool is never
sent nor searchable; a request never has only deferred tools (when on, ToolSearch is always sent
and never deferred; when ToolSearch is denied the decision is off, so everything goes in full);
every tool_reference left in the messages names a tool in `tools`.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from playground.engine.announcements import (
    ANNOUNCEMENT_LAYOUTS,
    ANNOUNCEMENT_STYLES,
    DEFAULT_BUDGET_SHARE,
    DEFAULT_MAX_SHARE,
    WARN_SHARE,
    MIN_BUDGET_TOKENS,
    Announcement,
    announce,
)
from playground.engine.history import (
    CompactionBoundary,
    Message,
    blocks_of,
    discovered_tool_names,
    drop_dangling_references,
    referenced_tool_names,
    strip_tool_references,
)
from playground.engine.modes import DEFAULT_UNSUPPORTED_MODEL_PATTERNS, ModeDecision, ModeSetting, decide_mode, parse_mode
from playground.engine import refusals
from playground.engine.prompt_cache import DEFAULT_TTL, check_ttl
from playground.engine.permissions import PermissionDecision, PermissionFilterResult, PermissionPolicy
from playground.engine.tokens import TokenCounter, count_messages
from playground.engine.toolsearch_tool import (
    DEFAULT_MAX_RESULTS,
    NATIVE_STYLE,
    TOOL_SEARCH_TOOL,
    deferred_tool_not_loaded_message,
)
from playground.engine.tools import TOOL_SEARCH_NAME, Tool, ToolCatalog
from playground.engine.wires.anthropic_tool_changes import DEFAULT_TOOL_CHANGES_K, DEFAULT_TOOL_CHANGES_MIN_SCORE
from playground.engine.wires.registry import wire_style

DEFAULT_MAX_TOKENS = 4096  # the engine's own default; the Django side passes AGENT_MAX_TOKENS


@dataclass
class AgentSettings:
    """What an agent profile decides about tool search (the Django side fills it from a profile row)."""

    mode: str | ModeSetting = ""  # ENABLE_TOOL_SEARCH: "", true, false, auto, auto:N, auto:Ntokens
    # The wire style, by its one name (engine/wires/registry.py): native, client, server, openai-hosted,
    # openai-client, openai-functions. The style says how the turn is planned (`planned_as`) and sent.
    wire: str = NATIVE_STYLE
    # The "server" style's search tool (bm25 | regex), replacing our ToolSearch on the wire; "" otherwise.
    server_search: str = ""
    server_descriptions: dict[str, str] = field(default_factory=dict)  # MCP server → its description (OpenAI namespaces)
    backend: str = "default"  # search backend name, resolved by whoever runs ToolSearch
    max_results: int = DEFAULT_MAX_RESULTS
    announcement_style: str = "full"  # full | delta
    announcement_layout: str = "flat"  # flat | grouped | budgeted
    announcement_budget: int = 0  # budgeted layout's token budget; 0 → DEFAULT_BUDGET_SHARE of the window
    model: str = "claude-sonnet-4-5"
    context_window: int = 200_000
    base_url: str = ""
    system_prompt: str = ""
    unsupported_model_patterns: tuple[str, ...] = DEFAULT_UNSUPPORTED_MODEL_PATTERNS
    max_tokens: int = DEFAULT_MAX_TOKENS  # the wire request's max_tokens
    # Prompt caching (prompt_cache.py): the Anthropic wire builders mark cache_control breakpoints
    # (end of tools, end of system, the conversation's tail) with this TTL, "5m" or "1h".
    prompt_cache: bool = False
    prompt_cache_ttl: str = DEFAULT_TTL
    # The "tool-changes" style: before each person's turn the backend ranks the message and adds the
    # top `tool_changes_k` scoring at least `tool_changes_min_score` (tool_addition); ToolSearch stays
    # for what the prediction missed when `tool_changes_search`.
    tool_changes_k: int = DEFAULT_TOOL_CHANGES_K
    tool_changes_min_score: float = DEFAULT_TOOL_CHANGES_MIN_SCORE
    tool_changes_search: bool = True
    # A deferred tool the model calls before a search loaded it: load it (as `select:<tool>` would)
    # and ask the model to call it again, instead of only the error naming `select:` (the default).
    load_on_call: bool = False

    @property
    def loads_on_call(self) -> bool:
        """Whether a deferred tool called early is loaded (`load_on_call`) in this turn's wire: a
        tool_result's tool_reference is a discovery on Anthropic's wires (the client style reads it
        as a text marker) and on OpenAI's functions; OpenAI's tool_search styles load a function
        only through a `tool_search_output` answering a search call, so there the error stays."""
        return self.load_on_call and wire_style(self.wire).loads_from_tool_result

    def __post_init__(self) -> None:
        wire_style(self.wire).check_settings(self.server_search)  # an unknown style or a bad variant fails here
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if self.tool_changes_k < 1:
            raise ValueError("tool_changes_k must be at least 1")
        if self.tool_changes_min_score < 0:
            raise ValueError("tool_changes_min_score must be 0 or more")
        check_ttl(self.prompt_cache_ttl)
        if self.announcement_style not in ANNOUNCEMENT_STYLES:
            raise ValueError(f"unknown announcement style {self.announcement_style!r} (expected full or delta)")
        if self.announcement_layout not in ANNOUNCEMENT_LAYOUTS:
            raise ValueError(
                f"unknown announcement layout {self.announcement_layout!r} (expected flat, grouped or budgeted)"
            )
        if self.context_window <= 0:
            raise ValueError("context_window must be positive")
        if self.announcement_budget and self.announcement_budget < MIN_BUDGET_TOKENS:
            raise ValueError(
                f"announcement_budget must be 0 (2 % of the window) or at least {MIN_BUDGET_TOKENS} tokens"
            )
        self.unsupported_model_patterns = tuple(self.unsupported_model_patterns)

    @property
    def planned_as(self) -> str:
        """How the engine plans this wire style's turns: "native" (references) or "client" (text)."""
        return wire_style(self.wire).planned_as

    @property
    def keeps_tool_search(self) -> bool:
        """Whether ToolSearch (and the announcement naming what it finds) is part of the request: the
        wire style decides (the tool-changes style without search drops both)."""
        return wire_style(self.wire).keeps_tool_search(self)

    @property
    def announcement_budget_tokens(self) -> int:
        return self.announcement_budget or max(MIN_BUDGET_TOKENS, int(self.context_window * DEFAULT_BUDGET_SHARE))

    @property
    def announcement_max_tokens(self) -> int:
        """Above this a flat or grouped list is never sent: the budgeted layout goes instead."""
        return max(1, int(self.context_window * DEFAULT_MAX_SHARE))


@dataclass
class ConversationState:
    """The stored history since the last compaction (if any), and that compaction's boundary."""

    messages: list[Message] = field(default_factory=list)
    compaction: CompactionBoundary | None = None


@dataclass(frozen=True)
class TokenAccounting:
    sent_tokens: int  # the tools this request carries
    baseline_tokens: int  # sending every permitted tool in full
    source: str  # which counter produced the figures
    announcement_tokens: int = 0  # the deferred-tool names announced (the price of deferring)
    request_tokens: int = 0  # the whole request: tools, system prompt and messages (0: not counted)
    context_window: int = 0  # the window the request must fit (0: unknown)

    @property
    def over_window(self) -> bool:
        """A request larger than the context window: a real model refuses it (the demo agent would not)."""
        return bool(self.context_window) and self.request_tokens > self.context_window

    @property
    def saved_tokens(self) -> int:
        return self.baseline_tokens - self.sent_tokens - self.announcement_tokens

    @property
    def saved_percent(self) -> float:
        return round(100.0 * self.saved_tokens / self.baseline_tokens, 1) if self.baseline_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sent_tokens": self.sent_tokens,
            "baseline_tokens": self.baseline_tokens,
            "announcement_tokens": self.announcement_tokens,
            "saved_tokens": self.saved_tokens,
            "saved_percent": self.saved_percent,
            "source": self.source,
            "request_tokens": self.request_tokens,
            "context_window": self.context_window,
            "over_window": self.over_window,
        }



@dataclass
class RequestPlan:
    tools: list[dict[str, Any]]  # Messages API tool dicts, in the order sent
    loaded_tools: list[str]  # sent without defer_loading (ToolSearch included when on)
    deferred_tools: list[str]  # permitted, deferred and not discovered: names only, never sent
    discovered_tools: list[str]  # deferred tools found in the history, sent this turn
    decision: ModeDecision
    announcement: Announcement | None
    system: str
    messages: list[Message]  # the history as sent: references cleaned, delta announcement appended
    tokens: TokenAccounting
    searchable: ToolCatalog  # what ToolSearch may search this turn (permitted tools; empty when off)
    planned_as: str  # the planning shape: native | client (`AgentSettings.planned_as`)
    model: str
    max_tokens: int
    excluded: list[tuple[str, PermissionDecision]] = field(default_factory=list)  # denied by permissions
    ask_tools: list[str] = field(default_factory=list)  # permitted, but each call needs a person's confirmation
    announcement_placement: str = ""  # "system" (full style) or "messages" (delta style)
    pending_mcp_servers: list[str] = field(default_factory=list)  # still connecting: named by a ToolSearch that finds nothing
    default_max_results: int = DEFAULT_MAX_RESULTS
    permitted: ToolCatalog = field(default_factory=lambda: ToolCatalog([]))  # after permissions, whatever the mode

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    @property
    def announcement_warning(self) -> str:
        """Why the announcement is worth a look: it takes a large share of the context window."""
        window = self.decision.context_window or 0
        tokens = self.tokens.announcement_tokens
        if not window or tokens <= window * WARN_SHARE:
            return ""
        return (
            f"The announcement of deferred tools takes {tokens:,} tokens, {100 * tokens / window:.0f} % of the "
            f"{window:,}-token context window, on every request: the grouped or budgeted layout would shrink it."
        )

    @property
    def announcement_block(self) -> dict[str, Any] | None:
        """Delta style: the text block appended to the last user message; the loop keeps it in the
        stored message so the next request knows what was announced. None otherwise."""
        if self.announcement is None or self.announcement_placement != "messages":
            return None
        return self.announcement.to_block()

    def call_error(self, tool_name: str) -> str | None:
        """Why the model may not call `tool_name` now (None when it may): the text of an error tool_result."""
        if tool_name in self.tool_names:
            return None
        return self.refusal(tool_name)[1]

    def refusal(self, tool_name: str) -> tuple[str, str]:
        """(why in one word, the error tool_result's text) for a call of a tool this request does not
        carry: "deferred" (not loaded by a ToolSearch yet), "denied" (a deny rule) or "unknown"."""
        if tool_name in self.deferred_tools:
            return refusals.DEFERRED, deferred_tool_not_loaded_message(tool_name)
        if any(name == tool_name for name, _ in self.excluded):
            return refusals.DENIED, f"Tool {tool_name!r} is not available: it is denied by a permission rule."
        return refusals.UNKNOWN, f"Tool {tool_name!r} does not exist or is not available in this conversation."

    def to_api_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": self.messages}
        if self.system:
            kwargs["system"] = self.system
        if self.tools:
            kwargs["tools"] = self.tools
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "planned_as": self.planned_as,
            "tools": [t["name"] for t in self.tools],
            "tool_definitions": self.tools,
            "loaded_tools": list(self.loaded_tools),
            "deferred_tools": list(self.deferred_tools),
            "discovered_tools": list(self.discovered_tools),
            "decision": self.decision.to_dict(),
            "announcement": self.announcement.to_dict() if self.announcement else None,
            "announcement_placement": self.announcement_placement,
            "tokens": self.tokens.to_dict(),
            "excluded": [{"name": name, **decision.to_dict()} for name, decision in self.excluded],
            "ask_tools": list(self.ask_tools),
            "searchable_count": len(self.searchable),
            "pending_mcp_servers": list(self.pending_mcp_servers),
        }


def permission_filter(catalog: ToolCatalog, policy: PermissionPolicy) -> PermissionFilterResult:
    """What a request's step 1 keeps of `catalog` under `policy`. The engine supplies ToolSearch
    itself, so a catalog entry of that name is ignored. The same for every turn with the same catalog
    and rules: callers that plan many turns keep it and pass it back as `filtered`."""
    own_tools = catalog if TOOL_SEARCH_NAME not in catalog else ToolCatalog(t for t in catalog if t.name != TOOL_SEARCH_NAME)
    return policy.filter(own_tools)


def _request_tokens(counter: TokenCounter, tool_tokens: int, system: str, messages: Sequence[Message]) -> int:
    """The whole request as the model reads it: the tools, the system prompt (with a full announcement)
    and the messages (with a delta announcement)."""
    return tool_tokens + (counter.count_text(system) if system else 0) + count_messages(counter, list(messages))


def build_request(
    catalog: ToolCatalog,
    policy: PermissionPolicy,
    settings: AgentSettings,
    state: ConversationState,
    *,
    token_counter: TokenCounter,
    pending_mcp_servers: Sequence[str] = (),
    filtered: PermissionFilterResult | None = None,
) -> RequestPlan:
    """Plan the next request. Pure: reads the catalog, rules and history; changes nothing.
    `filtered`: the policy's filter of `catalog`, when the caller already has it. (Callers outside
    the engine plan a turn with `turn.plan_turn`, which calls this.)"""
    # 1. Permissions.
    if filtered is None:
        filtered = permission_filter(catalog, policy)
    permitted = filtered.permitted
    tool_search_permitted = policy.decide(TOOL_SEARCH_NAME).permitted

    # 2. Deferral.
    deferred: list[Tool] = list(permitted.deferred)
    loaded: list[Tool] = [t for t in permitted if not permitted.is_deferred(t.name)]

    # 3. Mode. Auto weighs the full announcement; made here once, a "full" style request sends the same one.
    first = first_announcement(deferred, settings) if deferred and _mode_setting(settings).kind == "auto" else None
    decision = turn_mode(permitted, settings, tool_search_permitted=tool_search_permitted, token_counter=token_counter,
                         pending_mcp_servers=pending_mcp_servers, announcement=first)
    history = _with_summary(state)
    baseline = token_counter.count_catalog(permitted)

    if not decision.enabled:
        tools = [t.to_api() for t in permitted]
        return RequestPlan(
            tools=tools,
            loaded_tools=[t.name for t in permitted],
            deferred_tools=[],
            discovered_tools=[],
            decision=decision,
            announcement=None,
            system=settings.system_prompt,
            messages=strip_tool_references(history),
            tokens=TokenAccounting(baseline, baseline, token_counter.source,
                                   request_tokens=_request_tokens(token_counter, baseline, settings.system_prompt, history),
                                   context_window=settings.context_window),
            searchable=ToolCatalog([]),
            planned_as=settings.planned_as,
            model=settings.model,
            max_tokens=settings.max_tokens,
            excluded=filtered.excluded,
            ask_tools=filtered.ask,
            pending_mcp_servers=list(pending_mcp_servers),
            default_max_results=settings.max_results,
            permitted=permitted,
        )

    # 4. Discovered tools: from the history only, still permitted and deferred.
    deferred_names = {t.name for t in deferred}
    discovered = [n for n in discovered_tool_names(state.messages, state.compaction) if n in deferred_names]
    discovered_set = set(discovered)

    # 5. Request tools. Native: a discovered tool referenced by a tool_reference in the history goes
    # with defer_loading (the reference expands it). One with no reference left to expand it (carried
    # over a compaction, or found in a client-style result) goes as an ordinary tool, or the model
    # would never see its schema.
    native = settings.planned_as == NATIVE_STYLE
    referenced = set(referenced_tool_names(state.messages)) if native else set()
    # ToolSearch, unless the wire style drops it; the API refuses a request whose every tool is
    # deferred, so it stays when nothing else is loaded.
    keeps_search = settings.keeps_tool_search or not loaded
    tools = [t.to_api() for t in loaded] + ([TOOL_SEARCH_TOOL.to_api()] if keeps_search else [])
    tools += [permitted.get(n).to_api(defer_loading=n in referenced) for n in discovered]
    sent_names = [t["name"] for t in tools]
    messages = drop_dangling_references(history, sent_names) if native else strip_tool_references(history)

    if not keeps_search:  # the announcement names tools to load with ToolSearch
        announcement: Announcement | None = None
    elif first is not None and settings.announcement_style == "full":
        announcement = first
    else:
        announcement = announce(
            [t.name for t in deferred],
            state.messages,
            settings.announcement_style,
            layout=settings.announcement_layout,
            budget_tokens=settings.announcement_budget_tokens,
            max_tokens=settings.announcement_max_tokens,
        )
    system = settings.system_prompt
    placement = ""
    if announcement is not None and settings.announcement_style == "full":
        system = f"{system}\n\n{announcement.text}" if system else announcement.text
        placement = "system"
    elif announcement is not None:
        messages = _append_to_last_user_message(messages, announcement.to_block())
        placement = "messages"

    sent_tokens = token_counter.count_tools(tools)
    return RequestPlan(
        tools=tools,
        loaded_tools=[t["name"] for t in tools if not t.get("defer_loading")],
        deferred_tools=[t.name for t in deferred if t.name not in discovered_set],
        discovered_tools=discovered,
        decision=decision,
        announcement=announcement,
        system=system,
        messages=messages,
        tokens=TokenAccounting(
            sent_tokens,
            baseline,
            token_counter.source,
            announcement_tokens=token_counter.count_text(announcement.text) if announcement is not None else 0,
            request_tokens=_request_tokens(token_counter, sent_tokens, system, messages),
            context_window=settings.context_window,
        ),
        searchable=permitted,
        planned_as=settings.planned_as,
        model=settings.model,
        max_tokens=settings.max_tokens,
        excluded=filtered.excluded,
        ask_tools=filtered.ask,
        announcement_placement=placement,
        pending_mcp_servers=list(pending_mcp_servers),
        default_max_results=settings.max_results,
        permitted=permitted,
    )


def turn_mode(permitted: ToolCatalog, settings: AgentSettings, *, tool_search_permitted: bool,
              token_counter: TokenCounter, pending_mcp_servers: Sequence[str] = (),
              announcement: Announcement | None = None) -> ModeDecision:
    """Whether ToolSearch is on for a turn over these permitted tools, and why: the one place the
    mode decision gets the turn's inputs (the request plan and `turn.plan_turn` both ask here).
    `announcement`: `first_announcement` of the deferred tools, when the caller has made it already."""
    deferred = list(permitted.deferred)
    setting = _mode_setting(settings)
    announcement_tokens = 0
    if setting.kind == "auto" and deferred:
        # Deferring costs the announcement on every request: auto weighs the saving net of it.
        first = announcement if announcement is not None else first_announcement(deferred, settings)
        announcement_tokens = token_counter.count_text(first.text)
    return decide_mode(
        setting,
        deferred_tools=deferred,
        deferred_tokens=token_counter.count_catalog(permitted, deferred=True) if deferred else 0,
        announcement_tokens=announcement_tokens,
        token_counter=token_counter,
        context_window=settings.context_window,
        model=settings.model,
        base_url=settings.base_url,
        unsupported_model_patterns=settings.unsupported_model_patterns,
        tool_search_permitted=tool_search_permitted,
        planned_as=settings.planned_as,
        pending_mcp_servers=pending_mcp_servers,
    )


def first_announcement(deferred: Sequence[Tool], settings: AgentSettings) -> Announcement:
    """The full announcement of these deferred tools in the profile's layout: what a first turn
    announces, whatever the style, and what auto mode weighs against the saving."""
    return announce(deferred, [], "full", layout=settings.announcement_layout,
                    budget_tokens=settings.announcement_budget_tokens, max_tokens=settings.announcement_max_tokens)


def _mode_setting(settings: AgentSettings) -> ModeSetting:
    return settings.mode if isinstance(settings.mode, ModeSetting) else parse_mode(settings.mode)


def _with_summary(state: ConversationState) -> list[Message]:
    """The history as sent: the compaction summary (if any) opens the first user message."""
    messages = [copy.deepcopy(m) for m in state.messages]
    if state.compaction is None or not state.compaction.summary:
        return messages
    summary = {"type": "text", "text": f"<conversation-summary>\n{state.compaction.summary}\n</conversation-summary>"}
    if messages and messages[0].get("role") == "user":
        first = messages[0]
        blocks = blocks_of(first)
        # tool_result blocks must lead a user message; the summary goes after them in that case.
        leading = [b for b in blocks if b.get("type") == "tool_result"]
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        messages[0] = {**first, "content": leading + [summary] + rest}
        return messages
    return [{"role": "user", "content": [summary]}, *messages]


def _append_to_last_user_message(messages: list[Message], block: dict[str, Any]) -> list[Message]:
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") != "user":
            continue
        blocks = blocks_of(message)
        messages[position] = {**message, "content": blocks + [block]}
        return messages
    return [*messages, {"role": "user", "content": [block]}]
