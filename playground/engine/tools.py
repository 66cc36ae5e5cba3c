"""The tool model and the deferral rule."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_SEARCH_NAME = "ToolSearch"
MCP_PREFIX = "mcp__"
ALWAYS_LOAD_META_KEY = "anthropic/alwaysLoad"


class ToolDefinitionError(ValueError):
    """A tool definition the API would reject (bad name, schema that is not an object schema)."""


def validate_tool_name(name: object) -> str:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: it must match ^[a-zA-Z0-9_-]{{1,64}}$ "
            "(letters, digits, '_' and '-', 1 to 64 characters)"
        )
    return name


def validate_input_schema(schema: object, *, tool_name: str = "?") -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"tool {tool_name!r}: input_schema must be a JSON object, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f"tool {tool_name!r}: input_schema must be an object schema (\"type\": \"object\"), "
            f"got type {schema.get('type')!r}"
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ToolDefinitionError(f"tool {tool_name!r}: input_schema.properties must be an object")
    return dict(schema)


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


@dataclass(frozen=True, eq=False)
class Tool:
    """One tool as the engine sees it. Immutable; equality and hashing by name."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    search_hint: str = ""
    is_mcp: bool = False
    server: str | None = None
    should_defer: bool = False
    always_load: bool = False

    def __post_init__(self) -> None:
        validate_tool_name(self.name)
        validate_input_schema(self.input_schema, tool_name=self.name)
        if self.is_mcp and not self.server:
            object.__setattr__(self, "server", server_of(self.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tool) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @cached_property
    def content_hash(self) -> str:
        """Stable hash of everything a search index reads; keys per-tool caches (embeddings, tokens)."""
        payload = json.dumps(
            [self.name, self.description, self.search_hint, self.input_schema],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()

    def to_api(self, *, defer_loading: bool = False) -> dict[str, Any]:
        """The Messages API tool definition."""
        definition: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }
        if defer_loading:
            definition["defer_loading"] = True
        return definition

    @classmethod
    def from_mcp(cls, server: str, mcp_tool: Mapping[str, Any], **overrides: Any) -> Tool:
        """Build from an MCP `tools/list` entry (`name`, `description`, `inputSchema`, `_meta`)."""
        meta = mcp_tool.get("_meta") or mcp_tool.get("meta") or {}
        schema = mcp_tool.get("inputSchema") or mcp_tool.get("input_schema") or {"type": "object", "properties": {}}
        values: dict[str, Any] = {
            "name": mcp_tool_name(server, str(mcp_tool.get("name", ""))),
            "description": mcp_tool.get("description") or "",
            "input_schema": schema,
            "is_mcp": True,
            "server": server,
            "always_load": bool(meta.get(ALWAYS_LOAD_META_KEY, False)) if isinstance(meta, Mapping) else False,
        }
        values.update(overrides)
        return cls(**values)


def server_of(name: str) -> str | None:
    """`mcp__github__create_issue` → `github`; None for a name that is not an MCP tool name."""
    if not name.startswith(MCP_PREFIX):
        return None
    rest = name[len(MCP_PREFIX):]
    server, sep, _ = rest.partition("__")
    return server if sep and server else None


def is_deferred(tool: Tool) -> bool:
    """Claude Code's order: always_load → never; MCP → deferred; ToolSearch → never; else should_defer."""
    if tool.always_load:
        return False
    if tool.is_mcp:
        return True
    if tool.name == TOOL_SEARCH_NAME:
        return False
    return tool.should_defer


class ToolCatalog:
    """An ordered, name-unique set of tools with the lookups every backend needs.

    Catalog order is meaningful: ties in ranking keep it. A catalog is immutable once built;
    a changed tool set is a new catalog (backends key their indexes on `fingerprint`).
    """

    def __init__(self, tools: Iterable[Tool]):
        self._tools: tuple[Tool, ...] = tuple(tools)
        self._by_name: dict[str, Tool] = {}
        for tool in self._tools:
            if tool.name in self._by_name:
                raise ToolDefinitionError(f"duplicate tool name {tool.name!r}")
            self._by_name[tool.name] = tool
        self._by_lower: dict[str, Tool] = {}
        for tool in self._tools:
            self._by_lower.setdefault(tool.name.lower(), tool)
        self.deferred: tuple[Tool, ...] = tuple(t for t in self._tools if is_deferred(t))
        self._deferred_names = frozenset(t.name for t in self.deferred)
        self._deferred_by_lower: dict[str, Tool] = {}
        for tool in self.deferred:
            self._deferred_by_lower.setdefault(tool.name.lower(), tool)
        self._fingerprint: str | None = None

    def __iter__(self):
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def get_case_insensitive(self, name: str) -> Tool | None:
        return self._by_lower.get(name.lower())

    def get_deferred_case_insensitive(self, name: str) -> Tool | None:
        """The first deferred tool whose name equals `name` ignoring case (a dict lookup, not a scan)."""
        return self._deferred_by_lower.get(name.lower())

    def is_deferred(self, name: str) -> bool:
        return name in self._deferred_names

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            digest = hashlib.sha1()
            for tool in self._tools:
                digest.update(tool.content_hash.encode())
                digest.update(b"\x00" if is_deferred(tool) else b"\x01")
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def subset(self, names: Iterable[str]) -> ToolCatalog:
        keep = set(names)
        return ToolCatalog(t for t in self._tools if t.name in keep)
