"""Claude Code's `.claude/settings.json` permissions into the registry's rules (preview, then
commit) and a profile's rules out in the same format. The engine reads and writes the format
(`engine/claude_settings.py`); this module compares with the rules stored and saves through the
permissions editor's own service, so every imported rule is in the change history."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from playground.engine.claude_settings import SettingsRules, Unmapped, read_permission_settings, write_permission_settings
from playground.registry import services
from playground.registry.models import AgentProfile, PermissionRule

IMPORT_NOTE = "imported from Claude Code settings"


@dataclass
class SettingsImport:
    profile: AgentProfile | None  # None: global rules
    new: list[tuple[str, str]] = field(default_factory=list)  # (effect, pattern) to add
    present: list[tuple[str, str]] = field(default_factory=list)  # already a rule of that scope
    unmapped: list[Unmapped] = field(default_factory=list)


def preview_import(text: str, profile: AgentProfile | None) -> SettingsImport:
    """What importing `text` into `profile`'s rules (or the global ones) would add; raises
    SettingsFormatError for a file that is not Claude Code settings."""
    read: SettingsRules = read_permission_settings(text)
    stored = set(PermissionRule.objects.filter(profile=profile).values_list("effect", "pattern"))
    plan = SettingsImport(profile=profile, unmapped=read.unmapped)
    for rule in read.rules:
        (plan.present if rule in stored else plan.new).append(rule)
    return plan


@transaction.atomic
def commit_import(text: str, profile: AgentProfile | None, *, user) -> SettingsImport:
    """Add the preview's new rules (read again from the same text), each recorded in the history."""
    plan = preview_import(text, profile)
    for effect, pattern in plan.new:
        services.save_rule(PermissionRule(effect=effect, pattern=pattern, profile=profile, note=IMPORT_NOTE), user=user, before=None)
    return plan


def export_rules(profile: AgentProfile | None) -> dict:
    """The rules that decide for `profile` (the global ones and its own; None: the global ones) as
    Claude Code settings. Both sides take the strongest matching effect, so the file decides alike."""
    rules = PermissionRule.objects.filter(profile__isnull=True)
    if profile is not None:
        rules = rules | PermissionRule.objects.filter(profile=profile)
    return write_permission_settings(rules.values_list("effect", "pattern"))
