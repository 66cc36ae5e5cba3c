"""What a gateway session sees and does, decided by the engine: synchronous Django code that the
MCP handlers (server.py) run in worker threads.

The profile's request plan for a first turn (`build_request` with an empty history, client wire
style: MCP has no `defer_loading`) gives the loaded tools, the deferred names and the announcement.
A session's tools/list is that plan's loaded tools, `ToolSearch` (the engine's definition, its
description followed by the announcement text), the tools the session's searches discovered, and
`CallDiscoveredTool` for clients that never refresh their list. Nothing here restates an engine
rule: permissions, deferral, the mode decision and the search all come from `playground.engine`
through the registry's adapter.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from playground.engine.execution import ToolOutcome
from playground.engine.permissions import PermissionDecision, PermissionPolicy
from playground.engine.requests import AgentSettings, ConversationState, RequestPlan, build_request
from playground.engine.search.base import SearchBackend, ToolSearchResult
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog
from playground.engine.toolsearch_tool import (
    TOOL_SEARCH_TOOL,
    ToolSearchInputError,
    deferred_tool_not_loaded_message,
    run_tool_search,
    tool_search_result_content,
)
from playground.gateway.models import GatewaySession
from playground.registry import adapter

CALL_DISCOVERED_NAME = "CallDiscoveredTool"
CALL_DISCOVERED_TOOL: dict[str, Any] = {
    "name": CALL_DISCOVERED_NAME,
    "description": (
        "Call a tool that ToolSearch found, by name. Use it when the found tool does not appear in your "
        "tool list (some clients do not refresh their list after a search). The tool must have been "
        "returned by ToolSearch in this session first."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The exact name of a tool ToolSearch returned."},
            "arguments": {"type": "object", "description": "The tool's arguments, as its schema asks.", "default": {}},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}
FOUND_HINT = (
    "The tools in \"matches\" are now in this session's tool list. If your tool list did not change, "
    f"call them through {CALL_DISCOVERED_NAME} with {{\"name\": ..., \"arguments\": {{...}}}}."
)
# Result summaries in events are cut: a big file read is not worth keeping twice.
SUMMARY_CHARS = 500


@dataclass
class ProfileView:
    """One profile as the gateway serves it right now (rules and catalog read fresh)."""

    profile: Any
    catalog: ToolCatalog
    policy: PermissionPolicy
    agent_settings: AgentSettings
    plan: RequestPlan

    @property
    def tool_search_on(self) -> bool:
        return self.plan.decision.enabled

    def backend(self) -> SearchBackend:
        return adapter.search_backend(self.agent_settings.backend)

    def tool_search_definition(self) -> dict[str, Any]:
        """The engine's ToolSearch, its description carrying the profile's announcement (an MCP
        client has no system prompt of ours to put it in)."""
        definition = TOOL_SEARCH_TOOL.to_api()
        if self.plan.announcement is not None:
            definition["description"] = f"{definition['description']}\n\n{self.plan.announcement.text}"
        return definition

    def live_discovered(self, discovered: list[str]) -> list[str]:
        """The session's discovered tools that are still permitted and deferred (a rule or a
        catalog change since the search drops them from the list)."""
        deferred = set(self.plan.deferred_tools)
        return [name for name in dict.fromkeys(discovered) if name in deferred]

    def tools_for(self, discovered: list[str]) -> list[dict[str, Any]]:
        """The session's tools/list, as Messages API tool dicts."""
        if not self.tool_search_on:
            return [t for t in self.plan.tools]  # search off: every permitted tool, as the engine sends them
        tools = [t for t in self.plan.tools if t["name"] != TOOL_SEARCH_NAME]
        tools.append(self.tool_search_definition())
        tools += [self.plan.searchable.get(name).to_api() for name in self.live_discovered(discovered)]
        tools.append(CALL_DISCOVERED_TOOL)
        return tools

    def callable_names(self, discovered: list[str]) -> set[str]:
        loaded = {name for name in self.plan.loaded_tools if name != TOOL_SEARCH_NAME}
        return loaded | set(self.live_discovered(discovered))


def profile_view(profile_id: int) -> ProfileView:
    from playground.registry.models import AgentProfile

    profile = AgentProfile.objects.get(pk=profile_id)
    catalog = adapter.profile_catalog(profile)
    policy = adapter.permission_policy(profile)
    # MCP tool lists have no defer_loading or tool_reference: the client style is what fits.
    agent_settings = adapter.agent_settings(profile, wire_style="client")
    plan = build_request(
        catalog, policy, agent_settings, ConversationState(),
        token_counter=adapter.token_counter(), pending_mcp_servers=adapter.pending_mcp_servers(),
    )
    return ProfileView(profile=profile, catalog=catalog, policy=policy, agent_settings=agent_settings, plan=plan)


def usage_log():
    """The deployment's learned search usage, so a gateway search ranks as a conversation's does."""
    from playground.conversations.usage import usage_log as conversations_usage_log

    return conversations_usage_log()


def search(view: ProfileView, arguments: dict[str, Any]) -> ToolSearchResult:
    """The engine's ToolSearch over what this profile may search (raises ToolSearchInputError)."""
    return run_tool_search(
        arguments, view.plan.searchable, view.backend(),
        pending_mcp_servers=view.plan.pending_mcp_servers,
        default_max_results=view.agent_settings.max_results,
        usage=usage_log(),
    )


def add_discovered(session_pk: int, names: list[str]) -> list[str]:
    """Add names to the session's discovered tools; returns those that were new."""
    if not names:
        return []
    with transaction.atomic():
        session = GatewaySession.objects.select_for_update().get(pk=session_pk)
        known = list(session.discovered_tools or [])
        new = [n for n in dict.fromkeys(names) if n not in known]
        if new:
            session.discovered_tools = known + new
            session.save(update_fields=["discovered_tools", "last_seen_at"])
    return new


@dataclass
class SearchAnswer:
    content: list[dict[str, Any]]
    is_error: bool
    added: list[str] = field(default_factory=list)  # tools that joined this session's list
    event: dict[str, Any] = field(default_factory=dict)


def tool_search(session: GatewaySession, view: ProfileView, arguments: dict[str, Any]) -> SearchAnswer:
    started = time.perf_counter()
    query = str(arguments.get("query", "")) if isinstance(arguments, dict) else ""
    if not view.tool_search_on:
        message = f"ToolSearch is not available: tool search is off for this profile ({view.plan.decision.reason})."
        return SearchAnswer([_text(message)], True, event={"query": query, "error": message})
    try:
        result = search(view, arguments)
    except ToolSearchInputError as exc:
        return SearchAnswer([_text(str(exc))], True, event={"query": query, "error": str(exc)})
    deferred = set(view.plan.deferred_tools)
    added = add_discovered(session.pk, [n for n in result.matches if n in deferred])
    content = tool_search_result_content(result, "client")
    if result.matches:
        content = content + [_text(FOUND_HINT)]
    data = result.to_dict()
    event = {
        "query": result.query, "backend": result.backend, "matches": list(result.matches),
        "scores": [{"name": s["name"], "score": s.get("score")} for s in data["scored"]][:20],
        "reading": data["reading"], "added": added, "already_loaded": data["already_loaded"],
        "not_found": data["not_found"], "total_deferred_tools": result.total_deferred_tools,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    return SearchAnswer(content, False, added=added, event=event)


@dataclass
class CallAnswer:
    content: list[dict[str, Any]]
    is_error: bool
    event: dict[str, Any]


def call_error(view: ProfileView, name: str, discovered: list[str]) -> str | None:
    """Why `name` may not be called in this session now (None when it may)."""
    if name in view.callable_names(discovered):
        return None
    if name in view.plan.deferred_tools:
        return deferred_tool_not_loaded_message(name)
    return view.plan.call_error(name) or f"Tool {name!r} does not exist or is not available here."


def permission_refusal(name: str, decision: PermissionDecision) -> str | None:
    """The call-time permission check. `ask` cannot reach a person through MCP in this version: it
    is refused, saying so (see docs/gateway.md, limitations)."""
    if decision.effect == "deny":
        return f"Permission to use {name} was denied ({decision.reason})."
    if decision.effect == "ask":
        return (
            f"{name} needs a person's confirmation ({decision.reason}), and this MCP gateway cannot ask "
            "one yet: the call was not run. Ask an admin to allow the tool for this profile, or use it "
            "from a playground conversation where the prompt can be answered."
        )
    return None


def call_tool(session: GatewaySession, view: ProfileView, name: str, arguments: Any, *, via: str = "") -> CallAnswer:
    from playground.mcp_servers.executor import PlaygroundExecutor

    discovered = list(session.discovered_tools or [])
    event: dict[str, Any] = {"name": name, "arguments": arguments, "via": via}
    refusal = call_error(view, name, discovered)
    decision = view.policy.decide(name)
    event["permission"] = decision.effect
    event["permission_reason"] = decision.reason
    if refusal is None:
        refusal = permission_refusal(name, decision)
    if refusal is None and not isinstance(arguments, dict):
        refusal = f"arguments for {name} must be a JSON object, got {type(arguments).__name__}"
    if refusal is not None:
        event.update(is_error=True, refused=True, summary=refusal, duration_ms=0.0)
        return CallAnswer([_text(refusal)], True, event)
    tool = view.plan.searchable.get(name) or view.catalog.get(name)
    outcome: ToolOutcome = PlaygroundExecutor().execute(tool, arguments, timeout=settings.TOOL_CALL_TIMEOUT_SECONDS)
    event.update(
        is_error=outcome.is_error, refused=False, simulated=outcome.simulated,
        summary=outcome.text()[:SUMMARY_CHARS], duration_ms=round(outcome.duration_ms, 1),
    )
    return CallAnswer(outcome.content, outcome.is_error, event)


def list_event(view: ProfileView, tools: list[dict[str, Any]]) -> dict[str, Any]:
    counter = adapter.token_counter()
    return {
        "tools": [t["name"] for t in tools],
        "count": len(tools),
        "tokens": counter.count_tools(tools),
        "deferred_count": len(view.plan.deferred_tools) if view.tool_search_on else 0,
        "tool_search": view.tool_search_on,
        "decision": view.plan.decision.reason,
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def arguments_text(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
