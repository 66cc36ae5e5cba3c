"""One engine entry per turn: everything the engine decides for the next model request.

The agent loop, the MCP gateway, "what the model sees" and the ToolSearch inspector all call
`plan_turn` with the turn's inputs (catalog, rules, settings, history, counter, backend, usage,
pending servers) and read the answer from the `TurnPlan`: the mode decision and its reason, the
request plan, the token accounting, the final wire request (`wire_request`), whether a tool may be
called now (`check_call`), and a ToolSearch runner bound to this turn. None of them restates a rule.

Wire styles: how the planned request goes on the wire. Each style has one builder in
`WIRE_REQUEST_BUILDERS` (style name → function of the `TurnPlan` returning the request's keyword
arguments); `TurnPlan.wire_request()` calls the turn's own, or a named one. A new vendor's request
shape is one more builder there, reading the same plan.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from playground.engine.announcements import Announcement
from playground.engine.modes import ModeDecision
from playground.engine.openai_wire import OPENAI_HOSTED, OPENAI_WIRE_REQUEST_BUILDERS, visible_tools, wire_tool_names
from playground.engine.permissions import PermissionDecision, PermissionFilterResult, PermissionPolicy
from playground.engine.prompt_cache import CachingModel, cache_model, cache_vendor, with_cache_breakpoints
from playground.engine.requests import (
    AgentSettings,
    ConversationState,
    RequestPlan,
    TokenAccounting,
    build_request,
    turn_mode,
)
from playground.engine.search.base import SearchBackend, ToolSearchResult
from playground.engine.search.usage import UsageLog
from playground.engine.server_search import SERVER_STYLE, server_search_request
from playground.engine.tokens import TokenCounter
from playground.engine.toolsearch_tool import (
    CLIENT_STYLE,
    NATIVE_STYLE,
    run_tool_search,
)
from playground.engine.tools import TOOL_SEARCH_NAME, Tool, ToolCatalog, server_of

# A call's verdict (`TurnPlan.check_call`).
REFUSE, ASK, ALLOW = "refuse", "ask", "allow"


@dataclass(frozen=True)
class CallCheck:
    """Whether the model may call `name` now, and what follows.

    - `refuse`: `message` is the error tool_result the model reads; `refusal` says why in one word:
      "deferred" (called before a ToolSearch loaded it), "denied" (a deny rule), "server_search"
      (our ToolSearch, where Anthropic's server-side search replaces it), "unknown".
    - `ask`: a person must confirm first (`message`: the rule's reason); `tool` runs once they do.
    - `allow`: run `tool` (None for ToolSearch, which the turn answers itself: `run_tool_search`).
    `permission` is the rules' decision for the name, whatever the verdict (shown with the call).
    """

    name: str
    verdict: str
    permission: PermissionDecision
    tool: Tool | None = None
    message: str = ""
    refusal: str = ""

    @property
    def refused(self) -> bool:
        return self.verdict == REFUSE

    @property
    def needs_person(self) -> bool:
        return self.verdict == ASK


class TurnPlan:
    """One turn, planned from its inputs. The request plan is built the first time it is asked for,
    so a caller that needs only the mode decision or a ToolSearch (the inspector, on every
    keystroke) does not build a request for thousands of tools."""

    def __init__(
        self,
        catalog: ToolCatalog,
        policy: PermissionPolicy,
        settings: AgentSettings,
        state: ConversationState,
        *,
        token_counter: TokenCounter,
        backend: SearchBackend | None = None,
        pending_mcp_servers: Sequence[str] = (),
        usage: UsageLog | None = None,
        filtered: PermissionFilterResult | None = None,
    ) -> None:
        self.catalog, self.policy, self.settings, self.state = catalog, policy, settings, state
        self.token_counter = token_counter
        self.backend = backend  # None: this turn answers no ToolSearch call
        self.pending_mcp_servers = list(pending_mcp_servers)
        self.usage = usage  # past searches, for backends that learn from them
        self._filtered = filtered

    @cached_property
    def request(self) -> RequestPlan:
        return build_request(self.catalog, self.policy, self.settings, self.state, token_counter=self.token_counter,
                             pending_mcp_servers=self.pending_mcp_servers, filtered=self._filtered)

    @cached_property
    def permitted(self) -> ToolCatalog:
        """The tools permissions leave, whatever the mode (the inspector searches them)."""
        if self._filtered is not None:
            return self._filtered.permitted
        return self.request.permitted

    @cached_property
    def permitted_servers(self) -> tuple[str, ...]:
        """The MCP servers this turn may use, in name order: those with at least one permitted tool
        (a server whose every tool is denied or outside the profile's tool lists is not among them).
        Whose resources and prompts a client of this turn may see."""
        return tuple(sorted({server for tool in self.permitted if (server := tool.server or server_of(tool.name))}))

    @cached_property
    def decision(self) -> ModeDecision:
        """Whether ToolSearch is on this turn, and why (`decision.reason`)."""
        if "request" in self.__dict__ or self._filtered is None:
            return self.request.decision
        return turn_mode(self.permitted, self.settings, token_counter=self.token_counter,
                         tool_search_permitted=self.policy.decide(TOOL_SEARCH_NAME).permitted,
                         pending_mcp_servers=self.pending_mcp_servers)

    @property
    def tokens(self) -> TokenAccounting:
        return self.request.tokens

    @cached_property
    def wire_tokens(self) -> TokenAccounting:
        """`tokens` for the request as it goes on the wire, one accounting for both vendors: the
        Anthropic styles' plan as it stands; for OpenAI's styles the tools the model sees of the
        body (`openai_wire.visible_tools`: a deferred namespace's name and description, the tools a
        `tool_search_output` loaded…), counted by the same counter, plus the announcement where the
        style sends one (the hosted style's namespaces replace it). The baseline, every permitted
        tool in full, is the same for both."""
        tokens = self.request.tokens
        if not self.settings.openai_wire:
            return tokens
        announced = tokens.announcement_tokens if self.wire_announcement is not None else 0
        return replace(tokens, sent_tokens=self.token_counter.count_tools(visible_tools(self._wire_request)),
                       announcement_tokens=announced)

    @property
    def wire_announcement(self) -> Announcement | None:
        """The plan's announcement as far as the wire sends it: none in OpenAI's hosted style, whose
        namespaces (names and descriptions) tell the model what it can search."""
        return None if self.settings.openai_wire == OPENAI_HOSTED else self.request.announcement

    @property
    def searchable(self) -> ToolCatalog:
        """What a ToolSearch call of this turn searches: the permitted tools (none when the mode is off)."""
        return self.request.searchable

    # -- the wire request ----------------------------------------------------------------------------
    @property
    def wire_style(self) -> str:
        """How this turn's request goes on the wire: "native", "client" or "server" (Anthropic's
        server-side search tool instead of our ToolSearch; planned as native)."""
        if self.settings.openai_wire:
            return self.settings.openai_wire
        return SERVER_STYLE if self.settings.server_search else self.settings.wire_style

    def wire_request(self) -> dict[str, Any]:
        """The final request for this turn in its wire style (`wire_style`, built by that style's
        entry in WIRE_REQUEST_BUILDERS): for the Messages API, the keyword arguments of
        `messages.create` — model, max_tokens (the settings'), system, messages, tools. A new dict
        each call; its messages and tools are shared with the plan (copy before changing them)."""
        return dict(self._wire_request)

    @cached_property
    def _wire_request(self) -> dict[str, Any]:
        return _wire_request_builder(self.wire_style)(self)

    # -- the prompt cache ------------------------------------------------------------------------------
    @property
    def cache_vendor(self) -> str:
        """Whose prompt cache this turn's request goes to ("anthropic" or "openai")."""
        return cache_vendor(self.wire_style)

    @property
    def caches_prompt(self) -> bool:
        """Whether this turn's request is cached: OpenAI caches every long prompt on its own; Anthropic
        caches what the profile marks with breakpoints (`settings.prompt_cache`)."""
        return self.cache_vendor == "openai" or self.settings.prompt_cache

    def prompt_cache_model(self, counter: TokenCounter, *, cached: bool | None = None) -> CachingModel:
        """A fresh cache model for this turn's vendor, TTL and caching (`cached` overrides the latter: the
        all-tools baseline is priced cached whatever the profile does). Feed it the conversation's requests."""
        return cache_model(self.cache_vendor, ttl=self.settings.prompt_cache_ttl,
                           enabled=self.caches_prompt if cached is None else cached, counter=counter)

    def all_tools_request(self, messages: Sequence[dict[str, Any]] | None = None, *, cached: bool = True) -> dict[str, Any]:
        """The all-tools baseline of this turn: the request its wire style sends with every permitted
        tool in full (mode off, no server-side search) over the same history (or `messages`), with
        cache breakpoints when `cached`. What the cache-aware savings compare with."""
        baseline = replace(self.settings, mode="false", server_search="", prompt_cache=cached)
        state = ConversationState(messages=list(self.state.messages if messages is None else messages),
                                  compaction=self.state.compaction)
        return TurnPlan(self.catalog, self.policy, baseline, state, token_counter=self.token_counter,
                        filtered=self._filtered).wire_request()

    @cached_property
    def sent_tool_names(self) -> frozenset[str]:
        """Every tool name the turn's wire request carries (with defer_loading or not; in an OpenAI
        namespace, or loaded by a `tool_search_output` in its input)."""
        return frozenset(wire_tool_names(self._wire_request))

    # -- the call-time question ------------------------------------------------------------------------
    def check_call(self, name: str, *, discovered: Iterable[str] = ()) -> CallCheck:
        """May the model call `name` now? Refuse / ask / allow, with the tool and the message.

        Callable: a tool this turn's wire request carries (sent in full, a discovered one with
        defer_loading, or, in the "server" style, any deferred tool the server's search may load),
        or one of `discovered` that is still deferred and permitted (a caller keeping found tools
        outside the history: the gateway's session). Then the rules: the request plan holds only
        permitted tools, so a callable tool is never denied; `ask` needs a person."""
        permission = self.policy.decide(name)
        request = self.request
        if name == TOOL_SEARCH_NAME:
            if self.settings.server_search and self.decision.enabled:
                return CallCheck(name, REFUSE, permission, refusal="server_search", message=(
                    "ToolSearch is not available: this conversation uses Anthropic's server-side search."))
            if name in self.sent_tool_names:
                return CallCheck(name, ALLOW, permission)
            return self._refused(name, permission)
        found_elsewhere = name in set(discovered) and name in request.deferred_tools
        if name not in self.sent_tool_names and not found_elsewhere:
            return self._refused(name, permission)
        tool = request.searchable.get(name) or self.catalog.get(name)
        if tool is None:  # a name only the wire carries (the server-side search tool's own)
            return self._refused(name, permission)
        if permission.effect == "ask":
            return CallCheck(name, ASK, permission, tool=tool, message=permission.reason)
        return CallCheck(name, ALLOW, permission, tool=tool)

    def _refused(self, name: str, permission: PermissionDecision) -> CallCheck:
        refusal, message = self.request.refusal(name)
        return CallCheck(name, REFUSE, permission, refusal=refusal, message=message)

    def run_tool_search(
        self, arguments: dict[str, Any], *, over: ToolCatalog | None = None, backend: SearchBackend | None = None,
        usage: UsageLog | None = None,
    ) -> ToolSearchResult:
        """Answer a ToolSearch call of this turn: its backend, usage log, pending MCP servers and
        default max_results, over `searchable` (a denied tool can never be found). `over` searches
        other tools the same way (the inspector: the permitted tools with the mode off, or the
        unfiltered ones to show what permissions took away). `backend` answers with another backend
        and everything else of this turn (the inspector comparing backends side by side). `usage`
        searches with another usage log than the turn's (a plan shared between callers, each with
        the log it read). Raises ToolSearchInputError for bad input."""
        backend = backend or self.backend
        if backend is None:
            raise ValueError("this turn was planned without a search backend")
        return run_tool_search(
            arguments,
            self.searchable if over is None else over,
            backend,
            pending_mcp_servers=self.pending_mcp_servers,
            default_max_results=self.settings.max_results,
            usage=self.usage if usage is None else usage,
        )


# -- wire styles: one builder each ---------------------------------------------------------------------
def messages_api_request(turn: TurnPlan) -> dict[str, Any]:
    """Native and client styles: the plan as it stands (the styles differ in the plan itself:
    defer_loading and tool_reference blocks, or ordinary tools and text)."""
    return turn.request.to_api_kwargs()


def server_search_wire_request(turn: TurnPlan) -> dict[str, Any]:
    """The "server" style: the native plan with Anthropic's search tool instead of ToolSearch and
    every permitted deferred tool sent with defer_loading (`server_search.server_search_request`)."""
    return server_search_request(turn.request.to_api_kwargs(), turn.request, turn.settings.server_search)


WireRequestBuilder = Callable[[TurnPlan], dict[str, Any]]


def with_anthropic_cache(builder: WireRequestBuilder) -> WireRequestBuilder:
    """A Messages API builder whose request carries the profile's cache breakpoints when it caches
    (`prompt_cache.with_cache_breakpoints`: end of tools, end of system, the conversation's tail)."""

    def build(turn: TurnPlan) -> dict[str, Any]:
        request = builder(turn)
        if turn.settings.prompt_cache:
            return with_cache_breakpoints(request, turn.settings.prompt_cache_ttl)
        return request

    build.__name__ = builder.__name__
    build.__doc__ = builder.__doc__
    return build


WIRE_REQUEST_BUILDERS: dict[str, WireRequestBuilder] = {
    NATIVE_STYLE: with_anthropic_cache(messages_api_request),
    CLIENT_STYLE: with_anthropic_cache(messages_api_request),
    SERVER_STYLE: with_anthropic_cache(server_search_wire_request),
    **OPENAI_WIRE_REQUEST_BUILDERS,  # openai-hosted, openai-client, openai-functions (openai_wire.py)
}


def _wire_request_builder(style: str) -> WireRequestBuilder:
    try:
        return WIRE_REQUEST_BUILDERS[style]
    except KeyError:
        raise ValueError(f"unknown wire style {style!r} (expected one of {', '.join(WIRE_REQUEST_BUILDERS)})") from None


def plan_turn(
    catalog: ToolCatalog,
    policy: PermissionPolicy,
    settings: AgentSettings,
    state: ConversationState | None = None,
    *,
    token_counter: TokenCounter,
    backend: SearchBackend | None = None,
    pending_mcp_servers: Sequence[str] = (),
    usage: UsageLog | None = None,
    filtered: PermissionFilterResult | None = None,
) -> TurnPlan:
    """Plan one turn. Pure: reads the catalog, rules, settings and history; changes nothing.

    `filtered`: `policy.filter(catalog)` when the caller already has it (cached catalogs keep their
    search index); `state` defaults to an empty conversation.
    """
    return TurnPlan(catalog, policy, settings, state if state is not None else ConversationState(),
                    token_counter=token_counter, backend=backend, pending_mcp_servers=pending_mcp_servers, usage=usage,
                    filtered=filtered)
