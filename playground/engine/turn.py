"""One engine entry per turn: everything the engine decides for the next model request.

The agent loop, the MCP gateway, "what the model sees" and the ToolSearch inspector all call
`plan_turn` with the turn's inputs (catalog, rules, settings, history, counter, backend, usage,
pending servers) and read the answer from the `TurnPlan`: the mode decision and its reason, the
request plan, the token accounting, the final wire request (`wire_request`), whether a tool may be
called now (`check_call`), and a ToolSearch runner bound to this turn. None of them restates a rule.

Wire styles: how the planned request goes on the wire. The turn's style (`TurnPlan.style`, the
`wires.base.WireStyle` that `settings.wire` names in `wires.registry`) builds the request, says what
the model sees of it and whose prompt cache it goes to; the turn only asks it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from playground.engine import refusals
from playground.engine.announcements import Announcement
from playground.engine.modes import ModeDecision
from playground.engine.permissions import PermissionDecision, PermissionFilterResult, PermissionPolicy
from playground.engine.prompt_cache import CachingModel
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
from playground.engine.tokens import TokenCounter
from playground.engine.toolsearch_tool import run_tool_search
from playground.engine.tools import TOOL_SEARCH_NAME, Tool, ToolCatalog, server_of
from playground.engine.wires.base import WireStyle
from playground.engine.wires.registry import wire_style

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
        body, counted by the same counter, plus the announcement where the style sends one
        (`WireStyle.wire_tokens`). The baseline, every permitted tool in full, is the same for both."""
        return self.style.wire_tokens(self)

    @property
    def wire_announcement(self) -> Announcement | None:
        """The plan's announcement as far as the wire sends it: none in OpenAI's hosted style, whose
        namespaces (names and descriptions) tell the model what it can search."""
        return self.request.announcement if self.style.announces(self) else None

    @property
    def searchable(self) -> ToolCatalog:
        """What a ToolSearch call of this turn searches: the permitted tools (none when the mode is off)."""
        return self.request.searchable

    # -- the wire request ----------------------------------------------------------------------------
    @property
    def style(self) -> WireStyle:
        """The wire style this turn goes out in (engine/wires/), named by `settings.wire`."""
        return wire_style(self.settings.wire)

    @property
    def wire(self) -> str:
        """The wire style's one name: native, client, server (Anthropic's server-side search tool
        instead of our ToolSearch; planned as native), openai-hosted, openai-client, openai-functions."""
        return self.settings.wire

    def wire_request(self) -> dict[str, Any]:
        """The final request for this turn in its wire style (`style.build_request`): for the Messages
        API, the keyword arguments of `messages.create` — model, max_tokens (the settings'), system,
        messages, tools. A new dict each call; its messages and tools are shared with the plan (copy
        before changing them)."""
        return dict(self._wire_request)

    @cached_property
    def _wire_request(self) -> dict[str, Any]:
        return self.style.build_request(self)

    # -- the prompt cache ------------------------------------------------------------------------------
    @property
    def cache_vendor(self) -> str:
        """Whose prompt cache this turn's request goes to ("anthropic" or "openai")."""
        return self.style.vendor

    @property
    def caches_prompt(self) -> bool:
        """Whether this turn's request is cached: OpenAI caches every long prompt on its own; Anthropic
        caches what the profile marks with breakpoints (`settings.prompt_cache`)."""
        return self.style.caches_prompt(self.settings)

    def prompt_cache_model(self, counter: TokenCounter, *, cached: bool | None = None) -> CachingModel:
        """A fresh cache model for this turn's vendor, TTL and caching (`cached` overrides the latter: the
        all-tools baseline is priced cached whatever the profile does). Feed it the conversation's requests."""
        return self.style.cache_model(ttl=self.settings.prompt_cache_ttl,
                                      enabled=self.caches_prompt if cached is None else cached, counter=counter)

    def all_tools_request(self, messages: Sequence[dict[str, Any]] | None = None, *, cached: bool = True) -> dict[str, Any]:
        """The all-tools baseline of this turn: the request its wire style sends with every permitted
        tool in full (mode off, no server-side search) over the same history (or `messages`), with
        cache breakpoints when `cached`. What the cache-aware savings compare with."""
        # The style's own shape with the mode off: the server style then sends the native request.
        baseline = replace(self.settings, mode="false", prompt_cache=cached)
        state = ConversationState(messages=list(self.state.messages if messages is None else messages),
                                  compaction=self.state.compaction)
        return TurnPlan(self.catalog, self.policy, baseline, state, token_counter=self.token_counter,
                        filtered=self._filtered).wire_request()

    @cached_property
    def sent_tool_names(self) -> frozenset[str]:
        """Every tool name the model may call in the turn's wire request (`style.offered_tool_names`):
        what it carries, with defer_loading or not (in an OpenAI namespace, or loaded by a
        `tool_search_output` in its input); in the "tool-changes" style a declared tool only once added."""
        return self.style.offered_tool_names(self, self._wire_request)

    @cached_property
    def tool_changes(self) -> Any:
        """What the harness changes before this turn's request (`style.tool_changes`), or None: the
        "tool-changes" style's `ToolChanges` — the tools predicted from the person's message and
        added by a `tool_addition` system message (with the ranking behind them), the offered tools
        now denied withdrawn by `tool_removal`. The wire request carries it; the loop stores its
        `message` in the history and shows the prediction."""
        return self.style.tool_changes(self)

    # -- the tools of this turn, as its request offers them -----------------------------------------------
    @cached_property
    def added_tools(self) -> tuple[str, ...]:
        """The deferred tools this turn's changes add before the request (`tool_changes.added`): the
        request offers them with their schemas, though no history the plan read discovered them yet."""
        changes = self.tool_changes
        return tuple(changes.added) if changes is not None else ()

    @property
    def tool_names(self) -> list[str]:
        """Every tool the turn offers with its schema: the plan's (loaded and discovered), then this
        turn's additions. What pages count as "sent"."""
        names = self.request.tool_names
        return [*names, *(n for n in self.added_tools if n not in set(names))]

    @property
    def discovered_tools(self) -> list[str]:
        """The deferred tools offered this turn: those the history discovered, then this turn's additions."""
        found = self.request.discovered_tools
        return [*found, *(n for n in self.added_tools if n not in set(found))]

    @property
    def deferred_tools(self) -> list[str]:
        """The deferred tools still hidden this turn (names only): the plan's, less this turn's additions."""
        added = set(self.added_tools)
        return [n for n in self.request.deferred_tools if n not in added]

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
                return CallCheck(name, REFUSE, permission, refusal=refusals.SERVER_SEARCH, message=(
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
        if refusal == refusals.DEFERRED and TOOL_SEARCH_NAME not in self.sent_tool_names:
            # No ToolSearch on the wire to load it with (the tool-changes style without search): say so.
            message = (f"Tool {name!r} is not offered in this conversation: it was not added for this request, "
                       "and there is no ToolSearch to load it.")
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
