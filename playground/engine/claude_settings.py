"""Claude Code's permission settings in and out: `.claude/settings.json` / `settings.local.json`.

Claude Code keeps `{"permissions": {"allow": [...], "ask": [...], "deny": [...]}}`, each entry a
rule: a tool name (`Write`, `mcp__github__create_issue`), a whole MCP server (`mcp__github`, or
`mcp__github__*`), or a tool with an argument specifier (`Bash(npm run test:*)`,
`Read(./.env)`, `WebFetch(domain:example.com)`). The playground's rules are by tool name only
(`permissions.validate_pattern`), with the same precedence (deny > ask > allow), so:

- names, servers and `mcp__server__*` map one to one;
- `Tool(*)` and `Tool()` mean the whole tool, as in Claude Code, and map to the name;
- a rule with a real specifier does **not** map: read as the whole tool it would allow (or deny,
  or ask for) far more than it says. It is reported, never widened silently.

Writing goes the other way: rules become the three lists, each sorted and once.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from playground.engine.permissions import ALLOW, ASK, DENY, validate_pattern

EFFECTS = (ALLOW, ASK, DENY)
MAX_SETTINGS_BYTES = 1_000_000
_SPECIFIED = re.compile(r"^(?P<tool>[^()\s]+)\((?P<specifier>.*)\)$", re.DOTALL)


class SettingsFormatError(ValueError):
    """The text is not Claude Code settings: the message says what is wrong, for the page."""


@dataclass(frozen=True)
class Unmapped:
    effect: str
    entry: str
    reason: str


@dataclass
class SettingsRules:
    rules: list[tuple[str, str]] = field(default_factory=list)  # (effect, pattern), in the file's order, once each
    unmapped: list[Unmapped] = field(default_factory=list)


def read_permission_settings(text: str) -> SettingsRules:
    """The rules a settings file holds, and the entries that have no equivalent here (with why)."""
    if len(text.encode("utf-8", "replace")) > MAX_SETTINGS_BYTES:
        raise SettingsFormatError(f"the file is over {MAX_SETTINGS_BYTES // 1000} KB: not a settings file")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsFormatError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(document, dict):
        raise SettingsFormatError("a settings file is a JSON object")
    permissions = document.get("permissions")
    if permissions is None:
        raise SettingsFormatError('no "permissions" key: nothing to import')
    if not isinstance(permissions, dict):
        raise SettingsFormatError('"permissions" must be an object with "allow", "ask" and "deny" lists')
    read = SettingsRules()
    seen: set[tuple[str, str]] = set()
    for effect in EFFECTS:
        entries = permissions.get(effect, [])
        if not isinstance(entries, list):
            raise SettingsFormatError(f'"permissions.{effect}" must be a list of rules')
        for entry in entries:
            if not isinstance(entry, str):
                read.unmapped.append(Unmapped(effect, json.dumps(entry)[:200], "not a rule (rules are strings)"))
                continue
            pattern, reason = _pattern(entry)
            if pattern is None:
                read.unmapped.append(Unmapped(effect, entry[:200], reason))
            elif (effect, pattern) not in seen:
                seen.add((effect, pattern))
                read.rules.append((effect, pattern))
    ignored = sorted(key for key in permissions if key not in EFFECTS)
    for key in ignored:
        read.unmapped.append(Unmapped("", f"permissions.{key}", "not a rule list (only allow, ask and deny are read)"))
    return read


def _pattern(entry: str) -> tuple[str | None, str]:
    text = entry.strip()
    specified = _SPECIFIED.match(text)
    if specified:
        specifier = specified.group("specifier").strip()
        if specifier not in ("", "*"):
            return None, (f"an argument rule ({specified.group('tool')} only for “{specifier[:60]}”): the playground's rules "
                          "are per tool, and the whole tool would be more than the rule says")
        text = specified.group("tool")
    try:
        return validate_pattern(text), ""
    except ValueError as exc:
        return None, str(exc)


def write_permission_settings(rules: Iterable[tuple[str, str]]) -> dict:
    """`{"permissions": {"allow": [...], "ask": [...], "deny": [...]}}` for (effect, pattern) pairs."""
    lists: dict[str, set[str]] = {effect: set() for effect in EFFECTS}
    for effect, pattern in rules:
        lists[effect].add(pattern)
    return {"permissions": {effect: sorted(lists[effect]) for effect in EFFECTS}}
