"""The tool model and the deferral rule."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, TypeVar

T = TypeVar("T")

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
    _check_input_schema(schema, tool_name)
    return dict(schema)  # type: ignore[call-overload]


def _check_input_schema(schema: object, tool_name: str) -> None:
    if type(schema) is dict and schema.get("type") == "object" and type(schema.get("properties", {})) is dict:
        return  # the common case, without the abstract-class checks (100,000 tools are read at once)
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
        _check_input_schema(self.input_schema, self.name)
        if self.is_mcp and not self.server:
            object.__setattr__(self, "server", server_of(self.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tool) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @cached_property
    def content_hash(self) -> str:
        """Stable hash of everything a search index reads; keys per-tool caches (embeddings, tokens).
        The sha1 of `json.dumps([name, description, search_hint, input_schema], sort_keys=True,
        ensure_ascii=False, default=str)`, made from the schema's cached text (`_schema_texts`)."""
        head = f"{_json_string(self.name)}, {_json_string(self.description)}, {_json_string(self.search_hint)}"
        payload = f"[{head}, {_schema_texts(self.input_schema)[0]}]"
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()

    def api_json_length(self, *, defer_loading: bool = False) -> int:
        """Characters of `to_api(defer_loading=…)` as JSON with sorted keys and no spaces (what the
        token estimate counts), without building and serialising the dict."""
        return self._api_json_length + (_DEFER_LOADING if defer_loading else 0)

    @cached_property
    def _api_json_length(self) -> int:
        # Once per tool: every turn's mode decision counts the whole permitted catalog (100,000
        # tools: two passes of JSON-escaping every name and description, ~0.3 s, on each request).
        length = _API_FIXED + len(_json_string(self.description)) + len(_json_string(self.name))
        return length + _schema_texts(self.input_schema)[1]

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


def with_stored_content_hash(tool: Tool, content_hash: str) -> Tool:
    """`tool` with its `content_hash` taken as given: a hash the caller stored from this very
    definition (the web app keeps it in each tool's row), so that a catalog of 100,000 tools read
    back is not serialised and hashed again for its fingerprint. Empty: computed as usual."""
    if content_hash:
        tool.__dict__["content_hash"] = content_hash  # where `cached_property` keeps it
    return tool


# The sorted-key JSON of a schema, for content hashes and token estimates, kept per schema object:
# a catalog read from the database shares one object among the tools with the same schema, and at
# 100,000 tools serialising every schema again for each hash and each count is seconds of CPU.
# A string as `json.dumps(text, ensure_ascii=False)` writes it, without making an encoder per call.
_json_string = encode_basestring
_SCHEMA_TEXT_CACHE = 16_384
_schema_text_cache: dict[int, tuple[Mapping[str, Any], str, int]] = {}
# '{"description":' … ',"input_schema":' … ',"name":' … '}' around the values; '"defer_loading":true,'.
_API_FIXED = len('{"description":,"input_schema":,"name":}')
_DEFER_LOADING = len('"defer_loading":true,')


def _schema_texts(schema: Mapping[str, Any]) -> tuple[str, int]:
    """(the schema as `json.dumps(…, sort_keys=True, ensure_ascii=False, default=str)`, the length of
    its compact form with sorted keys). Cached by object, holding the object (so its id stays its own)."""
    hit = _schema_text_cache.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    text = json.dumps(schema, sort_keys=True, ensure_ascii=False, default=str)
    compact = len(json.dumps(dict(schema), ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    if len(_schema_text_cache) >= _SCHEMA_TEXT_CACHE:
        _schema_text_cache.clear()
    _schema_text_cache[id(schema)] = (schema, text, compact)
    return text, compact


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
        self._kept: dict[Any, Any] = {}

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

    def kept(self, key: Any, compute: Callable[[], T]) -> T:
        """`compute()`, worked out once for this catalog and kept with it (a catalog never changes, so
        a figure over all its tools, asked again on every turn, holds while the catalog is used; a
        changed catalog or permission set is another catalog object). Two threads may both compute
        it once: the value is the same."""
        try:
            return self._kept[key]
        except KeyError:
            value = self._kept[key] = compute()
            return value

    def subset(self, names: Iterable[str]) -> ToolCatalog:
        keep = set(names)
        return ToolCatalog(t for t in self._tools if t.name in keep)
