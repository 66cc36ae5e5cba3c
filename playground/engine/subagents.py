"""The tools a subagent gets: all − global agent denylist, ∩ its allowlist if any, − its disallowed tools.

Entries in each list are permission patterns (an exact name, `mcp__server`, `mcp__server__*`).
ToolSearch is not a catalog tool: `build_request` adds it whenever deferred tools remain, so a
subagent whose allowlist names only deferred MCP tools still keeps ToolSearch to load them (Claude
Code subagents lacking their deferred tools was a reported bug). To take ToolSearch away from a
subagent, list it in `disallowed` (or the global denylist): `subagent_policy` turns that into a deny
rule, and the mode decision then sends the subagent's deferred tools in full.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from playground.engine.permissions import PermissionPolicy, PermissionRule, pattern_matches, validate_pattern
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog


def _matches_any(name: str, patterns: Sequence[str]) -> bool:
    return any(pattern_matches(p, name) for p in patterns)


def _checked(patterns: Iterable[str], what: str) -> list[str]:
    checked = []
    for pattern in patterns:
        try:
            checked.append(validate_pattern(pattern))
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    return checked


def resolve_subagent_tools(
    catalog: ToolCatalog,
    *,
    global_denylist: Iterable[str],
    allowed: Iterable[str] | None = None,
    disallowed: Iterable[str] = (),
) -> ToolCatalog:
    denylist = _checked(global_denylist, "global agent denylist")
    allow = None if allowed is None else _checked(allowed, "subagent allowlist")
    deny = _checked(disallowed, "subagent disallowed tools")
    kept = []
    for tool in catalog:
        if tool.name == TOOL_SEARCH_NAME:
            continue  # supplied by build_request; see subagent_policy
        if _matches_any(tool.name, denylist):
            continue
        if allow is not None and not _matches_any(tool.name, allow):
            continue
        if _matches_any(tool.name, deny):
            continue
        kept.append(tool)
    return ToolCatalog(kept)


def subagent_policy(
    policy: PermissionPolicy,
    *,
    global_denylist: Iterable[str] = (),
    disallowed: Iterable[str] = (),
    scope: str = "subagent",
) -> PermissionPolicy:
    """The parent's policy, plus a deny rule for ToolSearch when the subagent must not have it."""
    if TOOL_SEARCH_NAME in set(global_denylist) | set(disallowed):
        return PermissionPolicy([*policy.rules, PermissionRule("deny", TOOL_SEARCH_NAME, scope=scope)])
    return policy
