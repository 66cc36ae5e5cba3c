"""Reading the message history: which deferred tools were discovered, and cleaning references.

Discovered tools come only from the history (never from a global), as in Claude Code:
- `tool_reference` blocks inside `tool_result` content (native wire style);
- client-style ToolSearch results: the JSON text (`{"matches": [...]}`) of a tool_result whose
  `tool_use_id` belongs to a ToolSearch `tool_use`;
- OpenAI Responses `tool_search_output` items kept in the history as they came (items without a
  `role`, or `responses_item` blocks of an assistant message): the functions they loaded (a namespace's functions by their catalog names);
- tools a harness added by `tool_addition` blocks in `role: "system"` messages (Anthropic's
  mid-conversation tool changes, the "tool-changes" wire style), less those a later `tool_removal`
  withdrew (`added_tool_names`);
- plus the set a compaction boundary carries over (the messages before it are gone), which also
  holds what Anthropic's server-side search found before it (`carried_tool_names`).
Messages are Messages API dicts (`{"role", "content": str | [blocks]}`); nothing here mutates them.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME, server_of

Message = dict[str, Any]
# An OpenAI Responses output item kept in an assistant message as it came (OpenAI's own search,
# reasoning…): `{"type": "responses_item", "item": {...}}`, sent back unchanged (openai_wire).
RESPONSES_ITEM = "responses_item"


@dataclass(frozen=True)
class CompactionBoundary:
    """Where older messages were summarised away; carries what must survive them."""

    summary: str
    discovered_tools: tuple[str, ...] = ()
    announced_tools: tuple[str, ...] = ()  # what the model had been told before; the next announcement is full anyway
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "discovered_tools": list(self.discovered_tools),
            "announced_tools": list(self.announced_tools),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> CompactionBoundary:
        """The boundary `to_dict` stored (missing keys: empty)."""
        return cls(
            summary=stored.get("summary", ""),
            discovered_tools=tuple(stored.get("discovered_tools", ())),
            announced_tools=tuple(stored.get("announced_tools", ())),
            metadata=dict(stored.get("metadata") or {}),
        )


def text_block(text: str) -> dict[str, Any]:
    """One Messages API text block."""
    return {"type": "text", "text": text}


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """Messages API content as a list of blocks: a plain string becomes one text block, anything
    that is not a block is dropped. The one reading of `str | [blocks]` every layer uses."""
    if isinstance(content, str):
        return [text_block(content)]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def blocks_of(message: Message) -> list[dict[str, Any]]:
    """A message's content as a list of blocks."""
    return content_blocks(message.get("content"))


def _tool_results(messages: Sequence[Message]) -> Iterator[dict[str, Any]]:
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in blocks_of(message):
            if block.get("type") == "tool_result":
                yield block


def result_content(block: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool_result's content as a list of blocks."""
    return content_blocks(block.get("content"))


def result_text(block: dict[str, Any]) -> str:
    """The text blocks of a tool_result, one per line."""
    return "\n".join(b["text"] for b in result_content(block) if b.get("type") == "text" and isinstance(b.get("text"), str))


def tool_search_use_ids(messages: Sequence[Message]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for block in blocks_of(message):
            if block.get("type") == "tool_use" and block.get("name") == TOOL_SEARCH_NAME and isinstance(block.get("id"), str):
                ids.add(block["id"])
    return ids


def client_style_matches(text: str) -> list[str]:
    """The `matches` of a client-style ToolSearch result text; [] for anything else (e.g. "No matching…")."""
    try:
        output = json.loads(text)
    except (ValueError, TypeError):
        return []
    matches = output.get("matches") if isinstance(output, dict) else None
    if not isinstance(matches, list):
        return []
    return [m for m in matches if isinstance(m, str)]


def search_output_tool_names(item: dict[str, Any]) -> list[str]:
    """The catalog names of the tools an OpenAI `tool_search_output` item loaded: functions by
    name, a namespace's functions as `mcp__<server>__<name>` (its name is `mcp__<server>` or a part
    `mcp__<server>__<k>`, see openai_wire)."""
    names: dict[str, None] = {}
    for tool in item.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            server = server_of(f"{tool['name']}__x") if tool["name"].startswith(MCP_PREFIX) else None
            for member in tool.get("tools") or []:
                if isinstance(member, dict) and isinstance(member.get("name"), str):
                    names.setdefault(f"{MCP_PREFIX}{server}__{member['name']}" if server else member["name"], None)
        elif isinstance(tool.get("name"), str):
            names.setdefault(tool["name"], None)
    return list(names)


def _search_outputs(messages: Sequence[Message]) -> Iterator[dict[str, Any]]:
    for item in messages:
        if item.get("role") is None and item.get("type") == "tool_search_output":
            yield item
        elif item.get("role") == "assistant" and "type" not in item:
            for block in blocks_of(item):
                kept = block.get("item") if block.get("type") == RESPONSES_ITEM else None
                if isinstance(kept, dict) and kept.get("type") == "tool_search_output":
                    yield kept


TOOL_ADDITION, TOOL_REMOVAL = "tool_addition", "tool_removal"
TOOL_CHANGE_TYPES = (TOOL_ADDITION, TOOL_REMOVAL)


def changed_tool_name(block: dict[str, Any]) -> str | None:
    """The tool a `tool_addition` / `tool_removal` block names: a `tool_reference`'s `name`, or a
    `tool_definition`'s definition's name; None for MCP references (the server resolves those)."""
    tool = block.get("tool")
    if not isinstance(tool, dict):
        return None
    if tool.get("type") == "tool_reference":
        name = tool.get("name")
    elif tool.get("type") == "tool_definition":
        name = (tool.get("definition") or {}).get("name") if isinstance(tool.get("definition"), dict) else None
    else:
        return None
    return name if isinstance(name, str) else None


def tool_change_blocks(messages: Sequence[Message]) -> Iterator[dict[str, Any]]:
    """The `tool_addition` / `tool_removal` blocks of the history's `role: "system"` messages, in order."""
    for message in messages:
        if message.get("role") != "system":
            continue
        for block in blocks_of(message):
            if block.get("type") in TOOL_CHANGE_TYPES:
                yield block


def fold_tool_changes(offered: dict[str, None], messages: Sequence[Message]) -> dict[str, None]:
    """`offered` (tool names, in order) after the messages' tool changes: each addition joins, each
    removal withdraws, in order, as the SDK's tool runner folds them. Changes `offered` and returns it."""
    for block in tool_change_blocks(messages):
        name = changed_tool_name(block)
        if name is None:
            continue
        if block["type"] == TOOL_REMOVAL:
            offered.pop(name, None)
        else:
            offered.setdefault(name, None)
    return offered


def added_tool_names(messages: Sequence[Message]) -> list[str]:
    """The tools the history's tool changes leave offered (`fold_tool_changes`), in order of addition."""
    return list(fold_tool_changes({}, messages))


def discovered_tool_names(messages: Sequence[Message], boundary: CompactionBoundary | None = None) -> list[str]:
    """Tool names discovered so far, in order of first discovery (the boundary's set first), tools a
    harness added by `tool_addition` included."""
    found: dict[str, None] = {}
    if boundary is not None:
        found.update(dict.fromkeys(boundary.discovered_tools))
    search_ids = tool_search_use_ids(messages)
    for result in _tool_results(messages):
        found.update(dict.fromkeys(n for n in loaded_by(result, from_search=result.get("tool_use_id") in search_ids) if n not in found))
    for output in _search_outputs(messages):
        found.update(dict.fromkeys(n for n in search_output_tool_names(output) if n not in found))
    found.update(dict.fromkeys(n for n in added_tool_names(messages) if n not in found))
    return list(found)


def carried_tool_names(messages: Sequence[Message], boundary: CompactionBoundary | None = None) -> list[str]:
    """What a compaction of `messages` carries over: the discovered tools, and the tools Anthropic's
    server-side search loaded (no tool_result holds those, so they are not "discovered" while their
    search is in the history: the server expands them itself; once it is summarised away, the
    model has them only if they are sent)."""
    carried = dict.fromkeys(discovered_tool_names(messages, boundary))
    carried.update(dict.fromkeys(n for n in server_search_tool_names(messages) if n not in carried))
    return list(carried)


def server_search_tool_names(messages: Sequence[Message]) -> list[str]:
    """The tools Anthropic's server-side search loaded: the `tool_references` of each
    `tool_search_tool_result` block in an assistant message (the server style's discoveries)."""
    names: dict[str, None] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for block in blocks_of(message):
            content = block.get("content") if block.get("type") == "tool_search_tool_result" else None
            for reference in (content.get("tool_references") or []) if isinstance(content, dict) else []:
                if isinstance(reference, dict) and isinstance(reference.get("tool_name"), str):
                    names.setdefault(reference["tool_name"], None)
    return list(names)


def loaded_by(result: dict[str, Any], *, from_search: bool = True) -> list[str]:
    """The tool names one tool_result loaded, in order: its tool_reference blocks (native style)
    and, when it answers a ToolSearch call, the `matches` of its JSON text (client style). An
    error result loads nothing."""
    if result.get("is_error"):
        return []
    names: dict[str, None] = {}
    for block in result_content(result):
        if block.get("type") == "tool_reference" and isinstance(block.get("tool_name"), str):
            names.setdefault(block["tool_name"], None)
        elif from_search and block.get("type") == "text" and isinstance(block.get("text"), str):
            names.update(dict.fromkeys(m for m in client_style_matches(block["text"]) if m not in names))
    return list(names)


def referenced_tool_names(messages: Sequence[Message]) -> list[str]:
    """Every tool named by a tool_reference block (or loaded by a `tool_search_output` item), in order."""
    names: dict[str, None] = {}
    for result in _tool_results(messages):
        for block in result_content(result):
            if block.get("type") == "tool_reference" and isinstance(block.get("tool_name"), str):
                names.setdefault(block["tool_name"], None)
    for output in _search_outputs(messages):  # an OpenAI search output loads its tools as a reference does
        names.update(dict.fromkeys(n for n in search_output_tool_names(output) if n not in names))
    return list(names)


def reference_marker(names: Iterable[str]) -> str:
    listed = ", ".join(names)
    return f"[ToolSearch loaded: {listed}]" if listed else "[ToolSearch result removed]"


def _rewrite_results(messages: Sequence[Message], keep: Any) -> list[Message]:
    """Copy of messages where each tool_result's tool_reference blocks pass through `keep(names) -> (kept, marker|None)`."""
    cleaned: list[Message] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            cleaned.append(copy.deepcopy(message))
            continue
        new_blocks = []
        for block in content:
            if not (isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("content"), list)):
                new_blocks.append(copy.deepcopy(block))
                continue
            references = [b.get("tool_name") for b in block["content"] if isinstance(b, dict) and b.get("type") == "tool_reference"]
            if not references:
                new_blocks.append(copy.deepcopy(block))
                continue
            kept, marker = keep(references)
            kept_set = set(kept)
            others = [
                copy.deepcopy(b)
                for b in block["content"]
                if not (isinstance(b, dict) and b.get("type") == "tool_reference") or b.get("tool_name") in kept_set
            ]
            if marker:
                others.append(text_block(marker))
            if not others:
                others = [text_block(reference_marker([]))]
            new_block = {k: copy.deepcopy(v) for k, v in block.items() if k != "content"}
            new_block["content"] = others
            new_blocks.append(new_block)
        cleaned.append({**{k: v for k, v in message.items() if k != "content"}, "content": new_blocks})
    return cleaned


def strip_tool_references(messages: Sequence[Message]) -> list[Message]:
    """Replace every tool_reference block by a short text marker naming the tools (tool search off,
    or the client wire style: the API must not see references)."""
    return _rewrite_results(messages, lambda names: ([], reference_marker(names)))


def drop_dangling_references(messages: Sequence[Message], available_names: Iterable[str]) -> list[Message]:
    """Drop tool_reference blocks naming tools not in `available_names` (the request's `tools`):
    the API answers a missing reference with a 400. A result left empty gets a text marker."""
    available = set(available_names)

    def keep(names: list[str]) -> tuple[list[str], str | None]:
        kept = [n for n in names if n in available]
        gone = [n for n in names if n not in available]
        if not gone:
            return kept, None
        return kept, (None if kept else f"[tools no longer available: {', '.join(gone)}]")

    return _rewrite_results(messages, keep)
