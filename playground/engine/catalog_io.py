"""Reading and writing tool catalogs and labelled query sets.

Formats read by `load_tools` (detected from the content):
- our JSON Lines: one tool object per line (`name`, `description`, `input_schema`, optional
  `server`, `search_hint`, `is_mcp`, `should_defer`, `always_load`) — the ../shared/toolsets format;
- an Anthropic Messages API `tools` array (`input_schema`; `defer_loading` → should_defer), bare or
  as `{"tools": [...]}`;
- an MCP `tools/list` result (`inputSchema`, `_meta`), bare (`{"tools": [...]}`) or inside a JSON-RPC
  response (`{"result": {"tools": [...]}}`); tool names are prefixed `mcp__<server>__`;
- an OpenAI `tools` list (`{"type": "function", "function": {...}}`) or legacy `functions` list.
Every error is a `CatalogFormatError` naming the source and line (and the tool when known).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.engine import safe_json
from playground.engine.tools import MCP_PREFIX, Tool, ToolCatalog, ToolDefinitionError

FORMATS: tuple[str, ...] = ("jsonl", "anthropic", "mcp", "openai")


class CatalogFormatError(ValueError):
    """Input that is not a catalog (or query set) we can read; says where."""

    def __init__(self, message: str, *, source: str = "<text>", line: int | None = None):
        self.source = source
        self.line = line
        self.reason = message
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class LabelledQuery:
    id: str
    query: str
    expected_tool_names: tuple[str, ...]
    equivalent_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    category: str = ""

    def accepted_names(self, gold: str) -> set[str]:
        return {gold, *self.equivalent_names.get(gold, ())}


def _read_source(text_or_path: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, source label). A str that looks like JSON is text; anything else is a path."""
    if isinstance(text_or_path, os.PathLike):
        path = Path(text_or_path)
    else:
        stripped = text_or_path.lstrip()
        if stripped[:1] in ("{", "[") or "\n" in text_or_path or not stripped:
            return text_or_path, "<text>"
        path = Path(text_or_path)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise CatalogFormatError("file not found", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise CatalogFormatError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(path)) from None
    except OSError as exc:
        raise CatalogFormatError(f"cannot read: {exc.strerror}", source=str(path)) from None


def load_tools(text_or_path: str | os.PathLike[str], *, server: str | None = None) -> list[Tool]:
    """Read tools in any supported format. `server` names the server of an MCP `tools/list` result
    (default: the file's stem, or "imported")."""
    text, source = _read_source(text_or_path)
    default_server = server or (Path(source).stem if source != "<text>" else "imported")
    if not text.strip():
        raise CatalogFormatError("empty input: no tools", source=source)
    try:
        document = safe_json.loads(text)
    except json.JSONDecodeError as exc:
        document = None
        if not _looks_like_jsonl(text):
            raise CatalogFormatError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=source, line=exc.lineno) from None
    if document is None or (isinstance(document, Mapping) and "name" in document):
        tools = _tools_from_jsonl(text, source)
    else:
        tools = _tools_from_document(document, text, source, default_server)
    _check_unique(tools, source)
    return [tool for tool, _ in tools]


def load_catalog(text_or_path: str | os.PathLike[str], *, server: str | None = None) -> ToolCatalog:
    return ToolCatalog(load_tools(text_or_path, server=server))


def _looks_like_jsonl(text: str) -> bool:
    """Several lines, the first a complete JSON object by itself (a pretty-printed document is not)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return isinstance(safe_json.loads(lines[0]), dict)
    except json.JSONDecodeError:
        return False


def _jsonl_records(text: str, source: str) -> Iterator[tuple[object, int]]:
    """(record, line number) for each non-blank line; a line that is not JSON is an error naming it."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield safe_json.loads(line), number
        except json.JSONDecodeError as exc:
            raise CatalogFormatError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=source, line=number) from None


def _tools_from_jsonl(text: str, source: str) -> list[tuple[Tool, int]]:
    tools = [(_tool_from_record(record, source, number), number) for record, number in _jsonl_records(text, source)]
    if not tools:
        raise CatalogFormatError("no tools found", source=source)
    return tools


def _tool_from_record(record: object, source: str, line: int | None) -> Tool:
    if not isinstance(record, Mapping):
        raise CatalogFormatError(f"expected a tool object, got {type(record).__name__}", source=source, line=line)
    name = record.get("name")
    if not isinstance(name, str):
        raise CatalogFormatError("tool has no 'name' string", source=source, line=line)
    schema = record.get("input_schema", record.get("inputSchema", {"type": "object", "properties": {}}))
    server = record.get("server")
    is_mcp = record.get("is_mcp")
    if is_mcp is None:
        # Our catalogs are MCP tools named mcp__<server>__<tool>; a plain name is a built-in tool.
        is_mcp = bool(server) or name.startswith(MCP_PREFIX)
    values: dict[str, Any] = {
        "name": name,
        "description": record.get("description") or "",
        "input_schema": schema,
        "search_hint": record.get("search_hint") or "",
        "is_mcp": bool(is_mcp),
        "server": server if isinstance(server, str) and server else None,
        "should_defer": bool(record.get("should_defer", record.get("defer_loading", False))),
        "always_load": bool(record.get("always_load", False)),
    }
    for key in ("description", "search_hint"):
        if not isinstance(values[key], str):
            raise CatalogFormatError(f"tool {name!r}: '{key}' must be a string", source=source, line=line)
    try:
        return Tool(**values)
    except ToolDefinitionError as exc:
        raise CatalogFormatError(str(exc), source=source, line=line) from None


def _tools_from_document(document: object, text: str, source: str, server: str) -> list[tuple[Tool, int]]:
    if isinstance(document, Mapping) and isinstance(document.get("result"), Mapping):
        document = document["result"]  # a JSON-RPC response around tools/list
    if isinstance(document, Mapping):
        if "tools" in document:
            items = document["tools"]
        elif "functions" in document:
            items = document["functions"]
        else:
            raise CatalogFormatError(
                "a JSON object must be a tool (with 'name'), or hold 'tools' (Anthropic / MCP / OpenAI) or 'functions'",
                source=source,
                line=1,
            )
    else:
        items = document
    if not isinstance(items, list):
        raise CatalogFormatError(f"expected a list of tools, got {type(items).__name__}", source=source, line=1)
    if not items:
        raise CatalogFormatError("the tools list is empty", source=source, line=1)
    lines = _item_lines(text, items)
    tools: list[tuple[Tool, int]] = []
    for position, item in enumerate(items):
        line = lines[position]
        if not isinstance(item, Mapping):
            raise CatalogFormatError(f"tools[{position}]: expected an object, got {type(item).__name__}", source=source, line=line)
        tools.append((_tool_from_item(item, position, source, line, server), line))
    return tools


def _tool_from_item(item: Mapping[str, Any], position: int, source: str, line: int, server: str) -> Tool:
    if item.get("type") == "function" and isinstance(item.get("function"), Mapping):
        item = item["function"]  # OpenAI tools list
    name = item.get("name")
    label = f"tools[{position}]" + (f" ({name!r})" if isinstance(name, str) else "")
    try:
        if "inputSchema" in item:  # MCP
            if not isinstance(name, str):
                raise CatalogFormatError(f"{label}: missing 'name'", source=source, line=line)
            return Tool.from_mcp(server, dict(item))
        if "parameters" in item and "input_schema" not in item:  # OpenAI function
            record = {"name": name, "description": item.get("description") or "", "input_schema": item["parameters"] or {"type": "object", "properties": {}}}
            return _tool_from_record(record, source, line)
        return _tool_from_record(item, source, line)
    except ToolDefinitionError as exc:
        raise CatalogFormatError(f"{label}: {exc}", source=source, line=line) from None
    except CatalogFormatError as exc:
        if exc.reason.startswith("tools["):
            raise
        raise CatalogFormatError(f"{label}: {exc.reason}", source=source, line=line) from None


def _item_lines(text: str, items: list[Any]) -> list[int]:
    """The line each item of the (first) top-level tools array starts on, found by re-decoding it."""
    decoder = json.JSONDecoder()
    start = _find_array_start(text)
    lines: list[int] = []
    position = start + 1 if start >= 0 else -1
    for _ in items:
        if position < 0:
            break
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        try:
            _, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            break
        lines.append(text.count("\n", 0, position) + 1)
        position = end
    return lines + [1] * (len(items) - len(lines))


def _find_array_start(text: str) -> int:
    stripped = text.lstrip()
    if stripped.startswith("["):
        return len(text) - len(stripped)
    for key in ('"tools"', '"functions"'):
        at = text.find(key)
        if at >= 0:
            return text.find("[", at)
    return -1


def _check_unique(tools: list[tuple[Tool, int]], source: str) -> None:
    first_line: dict[str, int] = {}
    for tool, line in tools:
        if tool.name in first_line:
            raise CatalogFormatError(f"duplicate tool name {tool.name!r} (first on line {first_line[tool.name]})", source=source, line=line)
        first_line[tool.name] = line


def load_queries(path: str | os.PathLike[str]) -> list[LabelledQuery]:
    """Read a labelled query set (../shared/toolsets/*/queries.jsonl)."""
    text, source = _read_source(Path(path))
    queries: list[LabelledQuery] = []
    seen: set[str] = set()
    for record, number in _jsonl_records(text, source):
        queries.append(_query_from_record(record, source, number))
        if queries[-1].id in seen:
            raise CatalogFormatError(f"duplicate query id {queries[-1].id!r}", source=source, line=number)
        seen.add(queries[-1].id)
    if not queries:
        raise CatalogFormatError("no queries found", source=source)
    return queries


def _query_from_record(record: object, source: str, line: int) -> LabelledQuery:
    if not isinstance(record, Mapping):
        raise CatalogFormatError(f"expected a query object, got {type(record).__name__}", source=source, line=line)
    query_id, query, expected = record.get("id"), record.get("query"), record.get("expected_tool_names")
    if not isinstance(query, str):
        raise CatalogFormatError("query has no 'query' string", source=source, line=line)
    if not isinstance(expected, list) or not expected or not all(isinstance(n, str) for n in expected):
        raise CatalogFormatError("'expected_tool_names' must be a non-empty list of tool names", source=source, line=line)
    equivalents = record.get("equivalent_names") or {}
    if not isinstance(equivalents, Mapping) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v) for k, v in equivalents.items()
    ):
        raise CatalogFormatError("'equivalent_names' must map tool names to lists of tool names", source=source, line=line)
    return LabelledQuery(
        id=str(query_id if query_id is not None else line),
        query=query,
        expected_tool_names=tuple(expected),
        equivalent_names={k: tuple(v) for k, v in equivalents.items()},
        category=str(record.get("category") or ""),
    )


def dump_tools(tools: Iterable[Tool], fmt: str = "jsonl") -> str:
    """Write tools as `jsonl` (lossless, our format), `anthropic`, `mcp` (tools/list) or `openai`."""
    tools = list(tools)
    if fmt == "jsonl":
        return "".join(json.dumps(_jsonl_record(t), ensure_ascii=False) + "\n" for t in tools)
    if fmt == "anthropic":
        return json.dumps([t.to_api(defer_loading=t.should_defer) for t in tools], ensure_ascii=False, indent=2)
    if fmt == "mcp":
        return json.dumps({"tools": [_mcp_record(t) for t in tools]}, ensure_ascii=False, indent=2)
    if fmt == "openai":
        return json.dumps(
            [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.input_schema)}} for t in tools],
            ensure_ascii=False,
            indent=2,
        )
    raise ValueError(f"unknown catalog format {fmt!r} (expected one of {', '.join(FORMATS)})")


def _jsonl_record(tool: Tool) -> dict[str, Any]:
    record: dict[str, Any] = {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}
    if tool.server:
        record["server"] = tool.server
    record["is_mcp"] = tool.is_mcp
    for key in ("search_hint", "should_defer", "always_load"):
        value = getattr(tool, key)
        if value:
            record[key] = value
    return record


def _mcp_record(tool: Tool) -> dict[str, Any]:
    """MCP tools/list entry: the bare tool name (without mcp__<server>__) when it is an MCP tool."""
    name = tool.name
    if tool.is_mcp and tool.server and name.startswith(f"{MCP_PREFIX}{tool.server}__"):
        name = name[len(f"{MCP_PREFIX}{tool.server}__"):]
    record: dict[str, Any] = {"name": name, "description": tool.description, "inputSchema": dict(tool.input_schema)}
    if tool.always_load:
        record["_meta"] = {"anthropic/alwaysLoad": True}
    return record


# The labelled set that ships with the project: requests written for the demo catalog the registry
# loads, kept beside that catalog (a data folder, not an import: the engine still reads no app code).
DEMO_TOOLSET = "demo"
BUNDLED_TOOLSETS: Mapping[str, Path] = {
    DEMO_TOOLSET: Path(__file__).resolve().parents[1] / "registry" / "demo_data",
}


def toolset_folder(name: str, root: Path | None = None) -> Path:
    """The folder of a toolset by name: a bundled one (always found, whatever TOOLSETS_DIR holds),
    else `<root or toolsets_dir()>/<name>`."""
    if name in BUNDLED_TOOLSETS:
        return BUNDLED_TOOLSETS[name]
    return (root or toolsets_dir()) / name


def toolset_names(root: Path | None = None) -> list[str]:
    """Toolsets with a catalog and labelled queries: the bundled ones first, then the folders of
    `root` (default `toolsets_dir()`) by name; a missing or unreadable folder adds none."""
    def labelled(folder: Path) -> bool:
        return (folder / "catalog.jsonl").is_file() and (folder / "queries.jsonl").is_file()

    names = [name for name, folder in BUNDLED_TOOLSETS.items() if labelled(folder)]
    try:
        found = sorted(p.name for p in (root or toolsets_dir()).iterdir() if labelled(p))
    except OSError:
        found = []
    return names + [name for name in found if name not in names]


def toolsets_dir() -> Path:
    """The shared toolsets folder: $TOOLSETS_DIR, else the first `shared/toolsets` beside the
    repository or one of its parent folders (CI clones have `<repo>/../shared/toolsets`)."""
    override = os.environ.get("TOOLSETS_DIR")
    if override:
        return Path(override)
    repo = Path(__file__).resolve().parents[2]
    for folder in repo.parents:
        candidate = folder / "shared" / "toolsets"
        if candidate.is_dir():
            return candidate
    return repo.parent / "shared" / "toolsets"
