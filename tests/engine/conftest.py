"""Engine test fixtures: small hand-built catalogs (the shared toolsets folder is in tests/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from playground.engine.tools import Tool, ToolCatalog

REPO_ROOT = Path(__file__).resolve().parents[2]


def mcp(server: str, action: str, description: str = "", **extra) -> Tool:
    return Tool(name=f"mcp__{server}__{action}", description=description, is_mcp=True, server=server, **extra)


def core_and_deferred_tools() -> ToolCatalog:
    """Core tools (loaded) plus MCP tools (deferred) from three servers."""
    return ToolCatalog(
        [
            Tool(name="Read", description="Read a file from the local filesystem."),
            Tool(name="Bash", description="Run a shell command."),
            mcp("github", "create_issue", "Create a new issue in a GitHub repository."),
            mcp("github", "list_issues", "List issues in a GitHub repository."),
            mcp("github", "create_pull_request", "Create a new pull request."),
            mcp("slack", "post_message", "Send a message to a Slack channel."),
            mcp("slack", "list_channels", "List the channels of a Slack workspace."),
            mcp("fs", "read_file", "Read the complete contents of a file."),
            Tool(name="NotebookEdit", description="Edit a Jupyter notebook cell.", should_defer=True, search_hint="jupyter ipynb"),
        ]
    )


@pytest.fixture
def small_catalog() -> ToolCatalog:
    return core_and_deferred_tools()
