"""Registry reads shared by pages: the filtered tool list and its totals, a tool's fate per profile."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet, Sum

from playground.engine.permissions import PermissionDecision
from playground.engine.tools import Tool as EngineTool
from playground.engine.tools import ToolCatalog
from playground.registry import adapter
from playground.registry.models import AgentProfile, Tool

YES_NO = {"yes": True, "no": False}


def filter_tools(params: Mapping[str, str]) -> QuerySet[Tool]:
    """Tools matching the list page's filters: q, deferred, always_load, enabled (yes/no), server, source."""
    tools = Tool.objects.select_related("server")
    query = (params.get("q") or "").strip()
    if query:
        tools = tools.filter(Q(name__icontains=query) | Q(description__icontains=query) | Q(search_hint__icontains=query))
    for param, field in (("deferred", "deferred"), ("always_load", "always_load"), ("enabled", "enabled")):
        value = YES_NO.get(params.get(param) or "")
        if value is not None:
            tools = tools.filter(**{field: value})
    server = (params.get("server") or "").strip()
    if server:
        tools = tools.filter(Q(server__name=server) | Q(server__isnull=True, server_name=server))
    source = params.get("source") or ""
    if source in Tool.Source.values:
        tools = tools.filter(source=source)
    return tools


def tool_totals(tools: QuerySet[Tool]) -> dict[str, int]:
    """Count and token cost of a filtered list, in one query."""
    totals = tools.order_by().aggregate(count=Count("id"), tokens=Sum("token_estimate"))
    return {"count": totals["count"] or 0, "tokens": totals["tokens"] or 0}


SERVER_SUGGESTIONS = 50
SERVER_TEXT_MAX = 200


def server_names(text: str = "", *, limit: int = SERVER_SUGGESTIONS) -> tuple[list[str], bool]:
    """The first `limit` servers a tool can belong to (registered servers and imported catalogs'
    server names) whose name contains `text`, by name; and whether there are more. A grown catalog
    has thousands of servers: the tools page offers these and fetches others as one types."""
    text = text.strip()[:SERVER_TEXT_MAX]
    registered = adapter.registered_servers().objects.order_by("name")
    imported = Tool.objects.exclude(server_name="").order_by("server_name")
    if text:
        registered, imported = registered.filter(name__icontains=text), imported.filter(server_name__icontains=text)
    names = set(registered.values_list("name", flat=True)[: limit + 1])
    names |= set(imported.values_list("server_name", flat=True).distinct()[: limit + 1])
    ordered = sorted(names)
    return ordered[:limit], len(ordered) > limit


@dataclass(frozen=True)
class ProfileVerdict:
    """What one profile's model gets of one tool: kept off its tool list, or the rules' decision."""

    profile: AgentProfile
    # None: its allowed / disallowed lists (or the subagent denylist) leave the tool out
    decision: PermissionDecision | None

    @property
    def effect(self) -> str:
        return self.decision.effect if self.decision is not None else "excluded"

    @property
    def reason(self) -> str:
        if self.decision is None:
            return "not on this profile's tool list (allowed / disallowed tools" + (
                ", or the subagent denylist)" if self.profile.is_subagent else ")")
        return self.decision.reason


def tool_verdicts(engine_tool: EngineTool) -> list[ProfileVerdict]:
    """Per agent profile, whether its model can see `engine_tool` and why: the same adapter calls a
    conversation makes (`profile_catalog`, `permission_policy`), with every rule read in one query."""
    global_rules, by_profile = adapter.rules_by_profile()
    verdicts = []
    for profile in AgentProfile.objects.order_by("name"):
        decision = None
        if engine_tool.name in adapter.profile_catalog(profile, ToolCatalog([engine_tool])):
            policy = adapter.permission_policy(profile, rules=global_rules + by_profile.get(profile.pk, []))
            decision = policy.decide(engine_tool.name)
        verdicts.append(ProfileVerdict(profile=profile, decision=decision))
    return verdicts
