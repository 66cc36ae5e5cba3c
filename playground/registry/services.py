"""Registry writes: bulk tool changes, catalog import (preview, then one transaction), rule changes
recorded in the audit trail. Reads that need the engine go through `adapter`."""
from __future__ import annotations

import json
from datetime import timedelta
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from playground.engine.catalog_io import CatalogFormatError, dump_tools, load_tools
from playground.engine.tools import TOOL_SEARCH_NAME, ToolDefinitionError
from playground.engine import safe_json
from playground.engine.tools import Tool as EngineTool
from playground.registry import adapter, indexing
from playground.registry.models import DERIVED_FIELDS, PermissionChange, PermissionRule, Tool, ToolImport

# -- bulk actions --------------------------------------------------------------------------------
_BULK_CHANGES: dict[str, dict[str, bool]] = {
    "enable": {"enabled": True},
    "disable": {"enabled": False},
    "defer": {"should_defer": True},
    "undefer": {"should_defer": False},
    "always_load": {"always_load": True},
    "no_always_load": {"always_load": False},
}


def bulk_tool_action(tools: Iterable[Tool], action: str) -> int:
    """Apply one bulk action; derived fields (deferral, tokens) and updated_at move with it."""
    changes = _BULK_CHANGES[action]
    now = timezone.now()
    rows = list(tools)
    for row in rows:
        for name, value in changes.items():
            setattr(row, name, value)
        row.refresh_derived_fields()
        row.updated_at = now
    Tool.objects.bulk_update(rows, [*changes, *DERIVED_FIELDS, "updated_at"], batch_size=500)
    indexing.request_index_build()  # enabled or deferred tools join the searched catalog
    return len(rows)


# -- import ----------------------------------------------------------------------------------------
@dataclass
class InvalidItem:
    where: str  # "line 3", "item 2", "file"
    reason: str


@dataclass
class ImportPreview:
    new: list[EngineTool] = field(default_factory=list)
    changed: list[tuple[EngineTool, list[str]]] = field(default_factory=list)  # (tool, changed fields)
    unchanged: list[EngineTool] = field(default_factory=list)
    invalid: list[InvalidItem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.invalid and bool(self.new or self.changed or self.unchanged)

    def summary(self) -> dict[str, int]:
        return {"new": len(self.new), "changed": len(self.changed), "unchanged": len(self.unchanged), "invalid": len(self.invalid)}


class ImportRejected(Exception):
    """The catalog has invalid items; nothing was imported."""


def _load(payload: str, server_name: str) -> list[EngineTool]:
    # load_tools reads a one-line string that does not look like JSON as a file path: uploaded text
    # must never name a file on this server, so it always goes in as text.
    text = payload if "\n" in payload else payload + "\n"
    return load_tools(text, server=server_name or None)


def _reason(exc: Exception) -> str:
    return exc.reason if isinstance(exc, CatalogFormatError) else str(exc)


def parse_catalog(payload: str, server_name: str = "") -> tuple[list[EngineTool], list[InvalidItem]]:
    """Parse with the engine's `load_tools`; on failure, locate every bad item, not just the first."""
    try:
        tools = _load(payload, server_name)
    except (CatalogFormatError, ToolDefinitionError, ValueError) as exc:
        invalid = _locate_invalid_items(payload, server_name) or [InvalidItem("file", str(exc))]
        return [], invalid
    invalid = [InvalidItem(t.name, f"{TOOL_SEARCH_NAME} is provided by the engine") for t in tools if t.name == TOOL_SEARCH_NAME]
    return tools, invalid


def _locate_invalid_items(payload: str, server_name: str) -> list[InvalidItem]:
    """Re-run the engine's loader item by item so the preview names every bad item with its reason."""
    pieces: list[tuple[str, str]] = []
    try:
        document = safe_json.loads(payload)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]  # a JSON-RPC response around tools/list
    if document is None:
        if _first_line_is_object(payload):  # JSON Lines: one tool per line
            pieces = [(f"line {n}", line) for n, line in enumerate(payload.splitlines(), 1) if line.strip()]
        # otherwise a broken JSON document: the engine's error (with its line) says it all
    elif isinstance(document, list):
        pieces = [(f"item {n}", json.dumps([item])) for n, item in enumerate(document, 1)]
    elif isinstance(document, dict):
        for key in ("tools", "functions"):
            if isinstance(document.get(key), list):
                pieces = [(f"{key}[{n - 1}]", json.dumps({key: [item]})) for n, item in enumerate(document[key], 1)]
                break
    invalid: list[InvalidItem] = []
    seen: dict[str, str] = {}
    for where, text in pieces:
        try:
            loaded = _load(text, server_name)
        except (CatalogFormatError, ToolDefinitionError, ValueError) as exc:
            invalid.append(InvalidItem(where, _reason(exc)))
            continue
        for tool in loaded:
            if tool.name in seen:
                invalid.append(InvalidItem(where, f"duplicate tool name {tool.name!r} (first at {seen[tool.name]})"))
            seen.setdefault(tool.name, where)
    return invalid


def _first_line_is_object(payload: str) -> bool:
    first = next((line for line in payload.splitlines() if line.strip()), "")
    try:
        return isinstance(safe_json.loads(first), dict)
    except json.JSONDecodeError:
        return False


_COMPARED_FIELDS = ("description", "input_schema", "search_hint")


def preview_import(payload: str, server_name: str = "") -> ImportPreview:
    tools, invalid = parse_catalog(payload, server_name)
    preview = ImportPreview(invalid=invalid)
    existing = {
        row["name"]: row
        for row in Tool.objects.filter(name__in=[t.name for t in tools]).values("name", *_COMPARED_FIELDS)
    }
    for tool in tools:
        row = existing.get(tool.name)
        if row is None:
            preview.new.append(tool)
            continue
        changed = [f for f in _COMPARED_FIELDS if _normalise(row[f]) != _normalise(getattr(tool, f))]
        if changed:
            preview.changed.append((tool, changed))
        else:
            preview.unchanged.append(tool)
    return preview


def _normalise(value: Any) -> Any:
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, sort_keys=True, default=_plain)
    return value or ""


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else str(value)


STAGED_IMPORT_LIFETIME = timedelta(days=1)


def stage_import(payload: str, *, filename: str = "", server_name: str = "", user=None) -> tuple[ToolImport, ImportPreview]:
    # Previews nobody committed keep a whole catalog each: forget them after a day.
    ToolImport.objects.exclude(status=ToolImport.Status.COMMITTED).filter(
        created_at__lt=timezone.now() - STAGED_IMPORT_LIFETIME
    ).delete()
    preview = preview_import(payload, server_name)
    staged = ToolImport.objects.create(
        filename=filename, server_name=server_name, payload=payload, summary=preview.summary(), created_by=user,
        status=ToolImport.Status.PREVIEWED if preview.ok else ToolImport.Status.REJECTED,
    )
    return staged, preview


@transaction.atomic
def commit_import(staged: ToolImport) -> dict[str, int]:
    """Create new tools and update changed definitions in one transaction; any invalid item → nothing.

    Local choices on existing rows (enabled, always_load, should_defer, the server link) are kept.
    """
    staged = ToolImport.objects.select_for_update().get(pk=staged.pk)
    if staged.status == ToolImport.Status.COMMITTED:
        raise ImportRejected("This import was already committed.")
    preview = preview_import(staged.payload, staged.server_name)
    if preview.invalid:
        raise ImportRejected(f"{len(preview.invalid)} invalid item(s): nothing was imported.")
    now = timezone.now()
    new_rows = []
    for tool in preview.new:
        new_rows.append(adapter.fill_tool_row(Tool(), tool, source=Tool.Source.IMPORTED))
    Tool.objects.bulk_create(new_rows, batch_size=500)
    if preview.changed:
        by_name = {t.name: t for t, _ in preview.changed}
        rows = list(Tool.objects.select_related("server").filter(name__in=list(by_name)))
        for row in rows:
            adapter.update_definition(row, by_name[row.name])
            row.updated_at = now
        Tool.objects.bulk_update(rows, [*_COMPARED_FIELDS, *DERIVED_FIELDS, "updated_at"], batch_size=500)
    summary = preview.summary()
    staged.status = ToolImport.Status.COMMITTED
    staged.summary = summary
    staged.committed_at = now
    staged.save(update_fields=["status", "summary", "committed_at"])
    indexing.request_index_build()  # the new and changed tools' vectors, in the background
    return summary


EXPORT_FORMATS = {
    "jsonl": ("ToolSearch JSONL", "application/x-ndjson", "jsonl"),
    "anthropic": ("Anthropic tools array", "application/json", "json"),
    "openai": ("OpenAI tools list", "application/json", "json"),
    "mcp": ("MCP tools/list result", "application/json", "json"),
}


def export_tools(rows: Iterable[Tool], fmt: str) -> str:
    return dump_tools(adapter.engine_tools(rows), fmt)


# -- permission rules ---------------------------------------------------------------------------
def rule_snapshot(rule: PermissionRule) -> dict[str, Any]:
    return {
        "effect": rule.effect,
        "pattern": rule.pattern,
        "profile": rule.profile.name if rule.profile_id else None,
        "note": rule.note,
    }


@transaction.atomic
def save_rule(rule: PermissionRule, *, user, before: dict[str, Any] | None) -> PermissionRule:
    """Save a created or edited rule and record the change (who, when, before, after)."""
    rule.changed_by = user
    created = rule.pk is None
    rule.save()
    after = rule_snapshot(rule)
    if not created and before == after:
        return rule
    PermissionChange.objects.create(
        rule_id=rule.pk,
        action=PermissionChange.Action.CREATE if created else PermissionChange.Action.UPDATE,
        before=None if created else before,
        after=after,
        changed_by=user,
    )
    return rule


@transaction.atomic
def delete_rule(rule: PermissionRule, *, user) -> None:
    before = rule_snapshot(rule)
    rule_id = rule.pk
    rule.delete()
    PermissionChange.objects.create(
        rule_id=rule_id, action=PermissionChange.Action.DELETE, before=before, after=None, changed_by=user
    )
