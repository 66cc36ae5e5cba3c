from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playground.engine.tools import Tool, ToolCatalog, ToolDefinitionError, is_deferred


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.name", "ümlaut"])
def test_invalid_tool_names_are_rejected_with_the_rule(name):
    with pytest.raises(ToolDefinitionError, match=r"\^\[a-zA-Z0-9_-\]\{1,64\}\$"):
        Tool(name=name)


def test_a_schema_must_be_an_object_schema():
    with pytest.raises(ToolDefinitionError, match="object schema"):
        Tool(name="a", input_schema={"type": "string"})


def test_deferral_order_always_load_then_mcp_then_toolsearch_then_should_defer():
    assert not is_deferred(Tool(name="mcp__s__a", is_mcp=True, always_load=True))
    assert is_deferred(Tool(name="mcp__s__a", is_mcp=True))
    assert not is_deferred(Tool(name="ToolSearch", should_defer=True))
    assert is_deferred(Tool(name="Notebook", should_defer=True))
    assert not is_deferred(Tool(name="Read"))


def test_from_mcp_prefixes_the_name_and_reads_always_load_from_meta():
    tool = Tool.from_mcp("github", {"name": "create_issue", "inputSchema": {"type": "object"}, "_meta": {"anthropic/alwaysLoad": True}})
    assert tool.name == "mcp__github__create_issue" and tool.server == "github" and tool.always_load


def test_the_catalog_finds_deferred_tools_by_name_ignoring_case_without_scanning():
    catalog = ToolCatalog([Tool(name="Read"), Tool(name="mcp__s__Read", is_mcp=True)])
    assert catalog.get_deferred_case_insensitive("MCP__S__READ").name == "mcp__s__Read"
    assert catalog.get_deferred_case_insensitive("read") is None
    assert catalog.get_case_insensitive("READ").name == "Read"


def test_duplicate_names_are_rejected():
    with pytest.raises(ToolDefinitionError, match="duplicate"):
        ToolCatalog([Tool(name="a"), Tool(name="a")])


def test_the_fingerprint_changes_with_what_search_reads():
    first = ToolCatalog([Tool(name="a", description="x")])
    assert first.fingerprint == ToolCatalog([Tool(name="a", description="x")]).fingerprint
    assert first.fingerprint != ToolCatalog([Tool(name="a", description="y")]).fingerprint


@settings(max_examples=200, deadline=None)
@given(name=st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True), description=st.text(max_size=40),
       hint=st.text(max_size=10), properties=st.dictionaries(st.text(max_size=8), st.dictionaries(
           st.sampled_from(["type", "description", "enum", "ü"]), st.one_of(st.text(max_size=8), st.integers(), st.booleans(),
                                                                        st.lists(st.text(max_size=4), max_size=3))), max_size=4),
       deferred=st.booleans())
def test_content_hash_and_api_length_are_those_of_serialising_the_whole_tool(name, description, hint, properties, deferred):
    """Both are made from the schema's cached text; they equal serialising everything at once."""
    schema = {"type": "object", "properties": properties}
    tool = Tool(name=name, description=description, input_schema=schema, search_hint=hint)
    payload = json.dumps([name, description, hint, schema], sort_keys=True, ensure_ascii=False, default=str)
    assert tool.content_hash == hashlib.sha1(payload.encode("utf-8")).hexdigest()
    whole = json.dumps([tool.to_api(defer_loading=deferred)], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert tool.api_json_length(defer_loading=deferred) == len(whole) - 2
    twin = Tool(name=name + "x", description=description, input_schema=schema, search_hint=hint)  # the same schema object
    assert twin.api_json_length() == len(json.dumps(twin.to_api(), ensure_ascii=False, sort_keys=True, separators=(",", ":")))
