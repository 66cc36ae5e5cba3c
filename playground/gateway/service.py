"""What a gateway session sees and does, decided by the engine: synchronous Django code that the
MCP handlers (server.py) run in worker threads.

The profile's request plan for a first turn (`plan_turn` with an empty history, client wire
style: MCP has no `defer_loading`) gives the loaded tools, the deferred names and the announcement.
A session's tools/list is that plan's loaded tools, `ToolSearch` (the engine's definition, its
description followed by the announcement text), the tools the session's searches discovered, and
`CallDiscoveredTool` for clients that never refresh their list. Nothing here restates an engine
rule: permissions, deferral, the mode decision and the search all come from `playground.engine`
through the registry's adapter.
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from playground.conversations.usage import usage_log as conversations_usage_log
from playground.engine.execution import ToolOutcome
from playground.engine.history import text_block
from playground.engine.permissions import PermissionDecision, PermissionPolicy
from playground.engine.requests import AgentSettings, RequestPlan
from playground.engine.turn import TurnPlan
from playground.engine.search.base import SearchBackend, ToolSearchResult
from playground.engine.openai_wire import tool_tokens_by_vendor
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog
from playground.engine.wires.registry import wire_style
from playground.engine.toolsearch_tool import (
    CLIENT_STYLE,
    TOOL_SEARCH_TOOL,
    ToolSearchInputError,
    tool_search_result_content,
)
from playground.gateway import listen
from playground.gateway.events import record_event
from playground.gateway.models import GatewayDiscovery, GatewayEvent, GatewayPrompt, GatewaySession
from playground.mcp_servers.executor import PlaygroundExecutor
from playground.registry import adapter, backends, learned_rankings
from playground.registry.models import AgentProfile
from playground.registry.previews import profile_settings

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
# Only a search reads what conversations learned (tools/list and calls never do). A burst of
# searches shares one read of the usage log's version for this long: a conversation that just
# finished teaches the gateway's searches a few seconds later, not at once.
USAGE_TTL_SECONDS = 10.0

_usage_lock = threading.Lock()
_usage_cache: tuple[float, Any] | None = None


def learned_usage() -> Any:
    """The conversations' usage log, re-read (its version: one aggregate query) at most every
    USAGE_TTL_SECONDS per process."""
    global _usage_cache
    now = time.monotonic()
    with _usage_lock:
        if _usage_cache is not None and now - _usage_cache[0] < USAGE_TTL_SECONDS:
            return _usage_cache[1]
    usage = conversations_usage_log()
    with _usage_lock:
        _usage_cache = (now, usage)
    return usage


def reset_usage_cache() -> None:
    """For tests: forget the cached usage log."""
    global _usage_cache
    with _usage_lock:
        _usage_cache = None


@dataclass
class ProfileView:
    """One profile as the gateway serves it right now (rules and catalog read fresh)."""

    profile: Any
    catalog: ToolCatalog
    policy: PermissionPolicy
    agent_settings: AgentSettings
    turn: TurnPlan  # the engine's one entry per turn, as conversations and the inspector use it

    @property
    def plan(self) -> RequestPlan:
        return self.turn.request

    @property
    def tool_search_on(self) -> bool:
        return self.plan.decision.enabled

    def backend(self) -> SearchBackend:
        return self.turn.backend

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


# A profile's first-turn plan (loaded tools, announcement, mode decision) depends only on the
# filtered catalog, the engine settings and the backend; building it again for every call cost
# about as much as the rest of a call's path. Plans are shared read-only between sessions (a
# search's usage log is passed in, never stored on the plan).
PLAN_CACHE_SIZE = 32
_plan_lock = threading.Lock()
_plan_cache: OrderedDict[tuple, TurnPlan] = OrderedDict()


def profile_view(profile: AgentProfile | int) -> ProfileView:
    """What the profile serves now: its row (read here from an id; a caller that has just read it,
    as the session's `select_related` does, passes it), rules, permitted catalog and first-turn plan."""
    if not isinstance(profile, AgentProfile):
        profile = AgentProfile.objects.get(pk=profile)
    policy = adapter.permission_policy(profile)
    # The permission filter of the catalog, cached per (catalog, rules, profile) as the inspector's:
    # filtering 700 tools again on every call cost more than the rest of the call path together.
    catalog, filtered = adapter.filtered_catalog(profile, policy=policy)
    # MCP tool lists have no defer_loading or tool_reference: the client style is what fits.
    agent_settings = adapter.agent_settings(profile, wire=CLIENT_STYLE)
    backend = learned_rankings.with_learned_ranking(profile.pk, backends.search_backend(agent_settings.backend))
    # `filtered` is a new object whenever the catalog, the rules or the profile's tool lists change.
    key = (profile.pk, id(filtered), repr(agent_settings), id(backend))
    with _plan_lock:
        turn = _plan_cache.get(key)
        if turn is not None:
            _plan_cache.move_to_end(key)
    if turn is None:
        # The usage log is read only when a search runs (learned_usage): lists and calls need none.
        turn = adapter.plan_turn(catalog, policy, agent_settings, backend=backend, filtered=filtered,
                                 learn_from_usage=False)
        with _plan_lock:
            _plan_cache[key] = turn
            while len(_plan_cache) > PLAN_CACHE_SIZE:
                _plan_cache.popitem(last=False)
    return ProfileView(profile=profile, catalog=catalog, policy=policy, agent_settings=agent_settings, turn=turn)


@dataclass(frozen=True)
class ServedStyle:
    """How the gateway plays a profile's wire style: every style goes out as MCP tools with
    client-side ToolSearch (MCP carries no defer_loading, tool_reference nor tool_addition)."""

    name: str  # the profile's style (`AgentSettings.wire`)
    label: str
    predicts_tools: bool  # the harness ranks a person's message before each turn (the tool-changes style)
    keeps_tool_search: bool  # the profile keeps ToolSearch in conversations

    @property
    def note(self) -> str:
        """What an MCP client of this profile gets instead, in a sentence ("": nothing to say)."""
        if not self.predicts_tools:
            return ""
        note = ("its harness adds predicted tools by tool_addition before each person's message in conversations; "
                "an MCP client sends no person's message to rank and MCP has no tool_addition, so here the "
                "client searches with ToolSearch instead")
        return note + ("" if self.keeps_tool_search else " (which this profile's conversations leave out)")


def served_style(profile: AgentProfile) -> ServedStyle:
    """The profile's own wire style, as its conversations run it, and how the gateway serves it."""
    settings = profile_settings(profile)
    style = wire_style(settings.agent.wire)
    return ServedStyle(name=style.name, label=style.label, predicts_tools=settings.predicts_tools,
                       keeps_tool_search=settings.agent.keeps_tool_search)


def search(view: ProfileView, arguments: dict[str, Any]) -> ToolSearchResult:
    """The engine's ToolSearch over what this profile may search (raises ToolSearchInputError),
    with what conversations learned (read here, not when the view is built: lists and calls need none)."""
    return view.turn.run_tool_search(arguments, usage=learned_usage())


def add_discovered(session_pk: int, names: list[str]) -> list[str]:
    """Add names to the session's discovered tools, and remember them for the client's next
    sessions (`remember`); returns those that were new to this session."""
    if not names:
        return []
    with transaction.atomic():
        session = GatewaySession.objects.select_for_update().get(pk=session_pk)
        known = list(session.discovered_tools or [])
        new = [n for n in dict.fromkeys(names) if n not in known]
        if new:
            session.discovered_tools = known + new
            session.save(update_fields=["discovered_tools", "last_seen_at"])
    remember(session.token_id, session.client_name, names)
    if new:
        token_id, client_name = session.token_id, session.client_name
        transaction.on_commit(lambda: listen.announce_tools_changed(token_id, client_name))
    return new


def remember(token_id: int | None, client_name: str, names: list[str]) -> None:
    """Keep found tools for this token and client name (GATEWAY_DISCOVERY_TTL_SECONDS from now);
    the token's expired entries go at the same time (no periodic job: a token's rows are few)."""
    ttl = settings.GATEWAY_DISCOVERY_TTL_SECONDS
    if token_id is None or ttl <= 0 or not names:
        return
    now = timezone.now()
    GatewayDiscovery.objects.bulk_create(
        [GatewayDiscovery(token_id=token_id, client_name=client_name, tool_name=name[:200], found_at=now)
         for name in dict.fromkeys(names)],
        update_conflicts=True, unique_fields=["token", "client_name", "tool_name"], update_fields=["found_at"],
    )
    GatewayDiscovery.objects.filter(token_id=token_id, found_at__lt=now - timezone.timedelta(seconds=ttl)).delete()


def remembered_tools(token_id: int | None, client_name: str) -> list[str]:
    """The tools this token's client (by its name from initialize) found within the last
    GATEWAY_DISCOVERY_TTL_SECONDS, oldest first: a new session of that client starts with them.
    Whether each may be listed or called is decided as for any discovered tool, at that moment."""
    ttl = settings.GATEWAY_DISCOVERY_TTL_SECONDS
    if token_id is None or ttl <= 0:
        return []
    cutoff = timezone.now() - timezone.timedelta(seconds=ttl)
    return list(GatewayDiscovery.objects.filter(token_id=token_id, client_name=client_name, found_at__gte=cutoff)
                .order_by("found_at", "pk").values_list("tool_name", flat=True))


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
        return SearchAnswer([text_block(message)], True, event={"query": query, "error": message})
    try:
        result = search(view, arguments)
    except ToolSearchInputError as exc:
        return SearchAnswer([text_block(str(exc))], True, event={"query": query, "error": str(exc)})
    deferred = set(view.plan.deferred_tools)
    added = add_discovered(session.pk, [n for n in result.matches if n in deferred])
    content = tool_search_result_content(result, CLIENT_STYLE)
    if result.matches:
        content = content + [text_block(FOUND_HINT)]
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
    content: list[dict[str, Any]]  # Messages API blocks (text, image): what the gateway sends for other tools
    is_error: bool
    event: dict[str, Any]
    # An MCP server's own result (every content type, structuredContent), passed on unchanged.
    mcp_result: dict[str, Any] | None = None


@dataclass
class PlannedCall:
    """A tools/call checked against the session and the rules (the turn's `check_call`), not run yet."""

    name: str
    arguments: Any
    via: str
    decision: PermissionDecision
    tool: Any = None
    refusal: str | None = None
    ask: bool = False  # the rules ask a person first

    @property
    def needs_person(self) -> bool:
        return self.refusal is None and self.ask

    def event(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "via": self.via,
                "permission": self.decision.effect, "permission_reason": self.decision.reason}


def plan_call(session: GatewaySession, view: ProfileView, name: str, arguments: Any, *, via: str = "") -> PlannedCall:
    """The call-time checks: the engine's (`TurnPlan.check_call`: may the session call it now —
    listed, or found by one of its searches — and what the rules say at this moment), then the
    gateway's own: ToolSearch is called directly (not through CallDiscoveredTool), arguments are an
    object, and `ask` waits for a person (`needs_person`) unless the gateway may not wait."""
    check = view.turn.check_call(name, discovered=list(session.discovered_tools or []))
    planned = PlannedCall(name=name, arguments=arguments, via=via, decision=check.permission, tool=check.tool,
                          ask=check.needs_person)
    if check.refused:
        planned.refusal = check.message
    elif name == TOOL_SEARCH_NAME:
        planned.refusal = f"Tool {name!r} does not exist or is not available here: call {name} directly."
    elif not isinstance(arguments, dict):
        planned.refusal = f"arguments for {name} must be a JSON object, got {type(arguments).__name__}"
    elif check.needs_person and settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS <= 0:
        planned.refusal = (
            f"{name} needs a person's confirmation ({check.message}), and this gateway is set not to wait "
            "for one (GATEWAY_PERMISSION_TIMEOUT_SECONDS=0): the call was not run."
        )
    return planned


def refuse(planned: PlannedCall, message: str | None = None, **extra: Any) -> CallAnswer:
    message = message or planned.refusal or "refused"
    event = {**planned.event(), "is_error": True, "refused": True, "summary": message, "duration_ms": 0.0, **extra}
    return CallAnswer([text_block(message)], True, event)


def execute(planned: PlannedCall, **extra: Any) -> CallAnswer:
    outcome: ToolOutcome = PlaygroundExecutor().execute(planned.tool, planned.arguments, timeout=settings.TOOL_CALL_TIMEOUT_SECONDS)
    event = {
        **planned.event(), "is_error": outcome.is_error, "refused": False, "simulated": outcome.simulated,
        "summary": outcome.text()[:SUMMARY_CHARS], "duration_ms": round(outcome.duration_ms, 1), **extra,
    }
    return CallAnswer(outcome.content, outcome.is_error, event, mcp_result=outcome.mcp_result)


def call_tool(session: GatewaySession, view: ProfileView, name: str, arguments: Any, *, via: str = "") -> CallAnswer:
    """A call with no person to ask (`ask` is refused): for callers that cannot wait."""
    planned = plan_call(session, view, name, arguments, via=via)
    if planned.needs_person:
        return refuse(planned, f"{name} needs a person's confirmation ({planned.decision.reason}); the call was not run.")
    return refuse(planned) if planned.refusal else execute(planned)


# -- permission prompts ---------------------------------------------------------------------------
def open_prompt(session: GatewaySession, planned: PlannedCall, *, ask_client: bool = False) -> GatewayPrompt:
    """A pending prompt on the session's page; `ask_client`: the MCP client is asked too
    (elicitation), and the first answer, there or on the page, stands."""
    prompt = GatewayPrompt.objects.create(session=session, tool_name=planned.name, arguments=planned.arguments,
                                          reason=planned.decision.reason[:300])
    record_event(session.pk, GatewayEvent.Type.PERMISSION_ASKED, {
        "prompt_id": prompt.pk, "name": planned.name, "arguments": planned.arguments, "reason": planned.decision.reason,
        "timeout_seconds": settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS, "ask_client": ask_client,
    })
    return prompt


def prompt_status(prompt_pk: int) -> str:
    return GatewayPrompt.objects.filter(pk=prompt_pk).values_list("status", flat=True).get()


def answer_prompt(prompt_pk: int, status: str, *, user=None, by: str = "") -> bool:
    """Settle a pending prompt (allowed, denied or timeout); False when it was already settled
    (two people answering, or an answer arriving after the timeout: the first one stands). `by`
    names who answered when it was not a logged-in user (the person at the MCP client)."""
    if status not in (GatewayPrompt.Status.ALLOWED, GatewayPrompt.Status.DENIED, GatewayPrompt.Status.TIMEOUT):
        raise ValueError(f"not an answer: {status!r}")
    with transaction.atomic():
        updated = GatewayPrompt.objects.filter(pk=prompt_pk, status=GatewayPrompt.Status.PENDING).update(
            status=status, answered_at=timezone.now(),
            answered_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
        )
        if updated:
            prompt = GatewayPrompt.objects.get(pk=prompt_pk)
            record_event(prompt.session_id, GatewayEvent.Type.PERMISSION_ANSWERED, {
                "prompt_id": prompt_pk, "name": prompt.tool_name, "answer": status,
                "by": (by or getattr(user, "username", "")) if status != GatewayPrompt.Status.TIMEOUT else "",
            })
    return bool(updated)


def finish_prompted_call(planned: PlannedCall, status: str) -> CallAnswer:
    if status == GatewayPrompt.Status.ALLOWED:
        return execute(planned, answer=status)
    if status == GatewayPrompt.Status.DENIED:
        return refuse(planned, f"A person denied permission to use {planned.name}.", answer=status)
    return refuse(planned, (
        f"Nobody answered the permission prompt for {planned.name} within "
        f"{settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS:g} s ({planned.decision.reason}): the call was not run."
    ), answer=status)


def list_event(view: ProfileView, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A tools/list as the session page shows it, counted as conversations count a turn's tools (one
    counter, one all-tools baseline) and per vendor: as Claude gets the tools, and as an OpenAI model
    gets them as function tools (`openai_wire.tool_tokens_by_vendor`)."""
    counter = adapter.token_counter()
    by_vendor = tool_tokens_by_vendor(tools, counter)
    return {
        "tools": [t["name"] for t in tools],
        "count": len(tools),
        "tokens": by_vendor["anthropic"],
        "tokens_by_vendor": by_vendor,
        "baseline_tokens": view.turn.tokens.baseline_tokens,
        "source": counter.source,
        "deferred_count": len(view.plan.deferred_tools) if view.tool_search_on else 0,
        "tool_search": view.tool_search_on,
        "decision": view.plan.decision.reason,
    }


def arguments_text(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
