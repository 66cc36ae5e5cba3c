from __future__ import annotations

import json

import pytest

from playground.engine.catalog_io import CatalogFormatError, dump_tools, load_catalog, load_queries, load_tools
from playground.engine.tools import Tool

from .conftest import mcp

TOOLS = [
    mcp("github", "create_issue", "Create an issue.", always_load=True),
    Tool(name="Notebook", description="Edit notebooks", search_hint="jupyter", should_defer=True),
]


def test_our_jsonl_round_trips_every_field():
    back = load_tools(dump_tools(TOOLS, "jsonl"))
    assert [(t.name, t.is_mcp, t.server, t.always_load, t.search_hint, t.should_defer) for t in back] == [
        ("mcp__github__create_issue", True, "github", True, "", False),
        ("Notebook", False, None, False, "jupyter", True),
    ]


def test_a_shared_toolsets_line_is_an_mcp_tool_and_so_deferred():
    line = json.dumps({"name": "mcp__time__convert_time", "description": "Convert", "input_schema": {"type": "object"}, "server": "time"})
    [tool] = load_tools(line)
    assert tool.is_mcp and tool.server == "time"


def test_an_anthropic_tools_array_reads_defer_loading_as_should_defer():
    text = json.dumps([{"name": "Alpha", "description": "a", "input_schema": {"type": "object"}, "defer_loading": True}])
    [tool] = load_tools(text)
    assert tool.should_defer and not tool.is_mcp


def test_an_mcp_tools_list_result_is_prefixed_with_the_server_and_reads_always_load():
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "get_time", "inputSchema": {"type": "object"}, "_meta": {"anthropic/alwaysLoad": True}}]}})
    [tool] = load_tools(text, server="time")
    assert tool.name == "mcp__time__get_time" and tool.always_load


def test_openai_tools_and_functions_lists_are_read():
    tools = json.dumps({"tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}}]})
    functions = json.dumps({"functions": [{"name": "g", "parameters": {"type": "object"}}]})
    assert [t.name for t in load_tools(tools)] == ["f"]
    assert [t.name for t in load_tools(functions)] == ["g"]


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "mcp"])
def test_every_export_format_reads_back(fmt):
    back = load_tools(dump_tools(TOOLS, fmt), server="github")
    assert [t.name for t in back] == ["mcp__github__create_issue", "mcp__github__Notebook" if fmt == "mcp" else "Notebook"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"name": "ok"}\n{"name": "bad name"}\n', 2, "invalid tool name"),
        ('{"name": "ok"}\n\n{"name": "x",\n', 3, "invalid JSON"),
        ('{"name": "a"}\n{"name": "a"}\n', 2, "duplicate tool name 'a' (first on line 1)"),
        ('[\n  {"name": "a"},\n  {"name": "b", "input_schema": {"type": "array"}}\n]', 3, "object schema"),
        ('{"name": "a", "description": 5}', 1, "'description' must be a string"),
        ('{"other": 1}', 1, "must be a tool"),
        ("[]", 1, "empty"),
    ],
)
def test_malformed_input_names_the_line(text, line, message):
    with pytest.raises(CatalogFormatError) as caught:
        load_tools(text)
    assert caught.value.line == line
    assert message in str(caught.value) and f"line {line}" in str(caught.value)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CatalogFormatError, match="file not found"):
        load_tools(tmp_path / "nope.jsonl")


def test_queries_read_with_equivalent_names_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "a", "query": "q", "expected_tool_names": ["x"], "equivalent_names": {"x": ["y"]}}) + "\n")
    [query] = load_queries(path)
    assert query.accepted_names("x") == {"x", "y"}
    path.write_text(path.read_text() + '{"id": "b", "query": "q", "expected_tool_names": []}\n')
    with pytest.raises(CatalogFormatError, match="line 2: 'expected_tool_names'"):
        load_queries(path)


def test_the_shared_catalogs_load(shared_toolsets):
    for name in ("mcp-combined", "stabletoolbench", "bfcl", "metatool"):
        catalog = load_catalog(shared_toolsets / name / "catalog.jsonl")
        assert len(catalog.deferred) == len(catalog) > 100
    assert len(load_queries(shared_toolsets / "mcp-combined" / "queries.jsonl")) == 90
