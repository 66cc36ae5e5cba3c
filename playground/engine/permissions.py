"""Permission rules: which tools the model may see at all.

Patterns, as in Claude Code: an exact tool name (`Read`, `mcp__github__create_issue`), a whole MCP
server (`mcp__github`), or a server wildcard (`mcp__github__*`). Effects: deny > ask > allow, no
matching rule = allow. Denied tools are removed before anything else happens (never sent, never
searchable); "ask" tools stay visible and need a person's confirmation when called.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from playground.engine.tools import MCP_PREFIX, TOOL_NAME_PATTERN, ToolCatalog

Effect = Literal["allow", "ask", "deny"]
ALLOW, ASK, DENY = "allow", "ask", "deny"
EFFECTS: tuple[str, ...] = (ALLOW, ASK, DENY)
_PRECEDENCE = {DENY: 3, ASK: 2, ALLOW: 1}
_SERVER_WILDCARD = re.compile(r"^mcp__([a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*)__\*$")


def validate_pattern(pattern: object) -> str:
    """Return the pattern if it is one of the three forms, else raise ValueError saying why."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError("a permission pattern must be a non-empty string")
    if pattern != pattern.strip():
        raise ValueError(f"permission pattern {pattern!r} has leading or trailing whitespace")
    if pattern.endswith("*"):
        if not _SERVER_WILDCARD.match(pattern):
            raise ValueError(
                f"permission pattern {pattern!r}: the only wildcard form is mcp__<server>__* "
                "(a whole MCP server); otherwise give an exact tool name or mcp__<server>"
            )
        return pattern
    if not TOOL_NAME_PATTERN.fullmatch(pattern):
        raise ValueError(
            f"permission pattern {pattern!r} is not a tool name: use letters, digits, '_' and '-' "
            "(1 to 64 characters), mcp__<server> or mcp__<server>__*"
        )
    if pattern == MCP_PREFIX.rstrip("_") or pattern == MCP_PREFIX:
        raise ValueError(f"permission pattern {pattern!r} names no server: use mcp__<server>")
    return pattern


def pattern_matches(pattern: str, tool_name: str) -> bool:
    if pattern == tool_name:
        return True
    if pattern.endswith("__*"):
        return tool_name.startswith(pattern[:-1])
    if pattern.startswith(MCP_PREFIX) and "__" not in pattern[len(MCP_PREFIX):]:
        # `mcp__github` is the whole server: every `mcp__github__…` tool.
        return tool_name.startswith(pattern + "__")
    return False


@dataclass(frozen=True)
class PermissionRule:
    effect: Effect
    pattern: str
    scope: str = "global"  # "global", or the profile / agent the rule belongs to
    rule_id: int | str | None = None

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ValueError(f"permission effect {self.effect!r} must be one of {', '.join(EFFECTS)}")
        validate_pattern(self.pattern)

    def matches(self, tool_name: str) -> bool:
        return pattern_matches(self.pattern, tool_name)

    def describe(self) -> str:
        where = "" if self.scope == "global" else f" ({self.scope})"
        return f"{self.effect} {self.pattern}{where}"

    def to_dict(self) -> dict[str, object]:
        return {"effect": self.effect, "pattern": self.pattern, "scope": self.scope, "rule_id": self.rule_id}


@dataclass(frozen=True)
class PermissionDecision:
    effect: Effect
    rule: PermissionRule | None
    reason: str

    @property
    def permitted(self) -> bool:
        return self.effect != "deny"

    @property
    def requires_confirmation(self) -> bool:
        return self.effect == "ask"

    def to_dict(self) -> dict[str, object]:
        return {"effect": self.effect, "rule": self.rule.to_dict() if self.rule else None, "reason": self.reason}


@dataclass
class PermissionFilterResult:
    permitted: ToolCatalog
    excluded: list[tuple[str, PermissionDecision]] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)  # permitted, but a person confirms each call

    @property
    def excluded_names(self) -> list[str]:
        return [name for name, _ in self.excluded]


class PermissionPolicy:
    """An ordered set of rules; the strongest matching effect decides (deny > ask > allow)."""

    def __init__(self, rules: Iterable[PermissionRule] = ()):
        self.rules: tuple[PermissionRule, ...] = tuple(rules)
        self._by_exact: dict[str, list[tuple[int, PermissionRule]]] | None = None
        self._by_prefix: dict[str, list[tuple[int, PermissionRule]]] = {}

    def _compile(self) -> dict[str, list[tuple[int, PermissionRule]]]:
        """Rules by the name they match exactly and by the `mcp__<server>__` prefix they match (both
        server forms), each with its position: a decision looks up a few keys instead of trying every
        rule, which counts when a catalog of 100,000 tools is filtered."""
        exact: dict[str, list[tuple[int, PermissionRule]]] = {}
        prefix: dict[str, list[tuple[int, PermissionRule]]] = {}
        for index, rule in enumerate(self.rules):
            pattern = rule.pattern
            if pattern.endswith("__*"):
                prefix.setdefault(pattern[:-1], []).append((index, rule))
                continue
            exact.setdefault(pattern, []).append((index, rule))
            if pattern.startswith(MCP_PREFIX) and "__" not in pattern[len(MCP_PREFIX):]:
                prefix.setdefault(pattern + "__", []).append((index, rule))
        self._by_prefix = prefix
        self._by_exact = exact
        return exact

    def _matching(self, tool_name: str) -> list[tuple[int, PermissionRule]]:
        exact = self._by_exact if self._by_exact is not None else self._compile()
        found = list(exact.get(tool_name, ()))
        if self._by_prefix and tool_name.startswith(MCP_PREFIX):
            # Every prefix of the name that ends in "__" (a server name may itself hold "_").
            at = tool_name.find("__", len(MCP_PREFIX))
            while at != -1:
                found.extend(self._by_prefix.get(tool_name[: at + 2], ()))
                at = tool_name.find("__", at + 2)
        return found

    def for_scopes(self, *scopes: str) -> PermissionPolicy:
        """The rules that apply in these scopes (e.g. "global" and one agent profile)."""
        wanted = set(scopes)
        return PermissionPolicy(r for r in self.rules if r.scope in wanted)

    def decide(self, tool_name: str) -> PermissionDecision:
        strongest: PermissionRule | None = None
        # In rule order, as a scan of every rule would meet them: the first of the strongest effect decides.
        for _, rule in sorted(self._matching(tool_name), key=lambda pair: pair[0]):
            if strongest is None or _PRECEDENCE[rule.effect] > _PRECEDENCE[strongest.effect]:
                strongest = rule
        if strongest is None:
            return PermissionDecision("allow", None, "no rule matches: allowed by default")
        return PermissionDecision(strongest.effect, strongest, f"rule '{strongest.describe()}'")

    def filter(self, catalog: ToolCatalog) -> PermissionFilterResult:
        kept = []
        excluded: list[tuple[str, PermissionDecision]] = []
        ask: list[str] = []
        for tool in catalog:
            decision = self.decide(tool.name)
            if decision.permitted:
                kept.append(tool)
                if decision.requires_confirmation:
                    ask.append(tool.name)
            else:
                excluded.append((tool.name, decision))
        permitted = catalog if not excluded else ToolCatalog(kept)
        return PermissionFilterResult(permitted=permitted, excluded=excluded, ask=ask)

    def __len__(self) -> int:
        return len(self.rules)
