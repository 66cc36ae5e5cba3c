from __future__ import annotations

import json

import pytest


@pytest.fixture
def toy_toolsets(tmp_path, monkeypatch):
    """A three-tool toolset with twelve labelled queries, as TOOLSETS_DIR."""
    folder = tmp_path / "toy"
    folder.mkdir()
    tools = [
        {"name": "mcp__weather__get_forecast", "description": "Weather forecast for a city", "input_schema": {"type": "object", "properties": {}}, "server": "weather"},
        {"name": "mcp__mail__send_email", "description": "Send an email", "input_schema": {"type": "object", "properties": {}}, "server": "mail"},
        {"name": "mcp__files__read_file", "description": "Read a file from disk", "input_schema": {"type": "object", "properties": {}}, "server": "files"},
    ]
    (folder / "catalog.jsonl").write_text("\n".join(json.dumps(t) for t in tools) + "\n")
    texts = [("What is the weather forecast in Rome?", "mcp__weather__get_forecast"),
             ("Please send an email to Bob", "mcp__mail__send_email"),
             ("read the file notes.txt", "mcp__files__read_file")] * 4
    queries = [{"id": f"q{i}", "query": t, "expected_tool_names": [g]} for i, (t, g) in enumerate(texts)]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path))
    return tmp_path
