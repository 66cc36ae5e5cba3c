"""One engine entry per turn: everything the engine decides for the next model request.

The agent loop, "what the model sees" and the ToolSearch inspector all call `plan_turn` with the
turn's inputs (catalog, rules, settings, history, counter, backend, usage, pending servers) and read
the answer from the `TurnPlan`: the mode decision and its reason, the request plan, the token
accounting, and a ToolSearch runner bound to this turn. None of them restates a rule.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from playground.engine.modes import ModeDecision
from playground.engine.permissions import PermissionFilterResult, PermissionPolicy
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
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog


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

    @property
    def searchable(self) -> ToolCatalog:
        """What a ToolSearch call of this turn searches: the permitted tools (none when the mode is off)."""
        return self.request.searchable

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
