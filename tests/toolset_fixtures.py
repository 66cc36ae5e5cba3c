"""A three-tool labelled toolset in the `../shared/toolsets` format, shared by search and evaluation tests."""
from __future__ import annotations

import json
from pathlib import Path

TOY_TOOLS = [
    {"name": "mcp__weather__get_forecast", "description": "Weather forecast for a city", "input_schema": {"type": "object", "properties": {}}, "server": "weather"},
    {"name": "mcp__mail__send_email", "description": "Send an email", "input_schema": {"type": "object", "properties": {}}, "server": "mail"},
    {"name": "mcp__files__read_file", "description": "Read a file from disk", "input_schema": {"type": "object", "properties": {}}, "server": "files"},
]
TOY_QUERIES = [
    ("What is the weather forecast in Rome?", "mcp__weather__get_forecast"),
    ("Please send an email to Bob", "mcp__mail__send_email"),
    ("read the file notes.txt", "mcp__files__read_file"),
] * 4


def write_toy_toolsets(root: Path) -> Path:
    """Write `root/toy/{catalog,queries}.jsonl` (twelve queries) and return `root`."""
    folder = root / "toy"
    folder.mkdir()
    (folder / "catalog.jsonl").write_text("\n".join(json.dumps(t) for t in TOY_TOOLS) + "\n")
    queries = [{"id": f"q{i}", "query": text, "expected_tool_names": [gold]} for i, (text, gold) in enumerate(TOY_QUERIES)]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    return root
