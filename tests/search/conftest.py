"""Fixtures for the search-quality tests: a small catalog whose right answers are obvious, and the
semantic extra (its tests fail under CI=true when the extra is missing, skip elsewhere)."""
from __future__ import annotations

import pytest

from playground.engine.tools import Tool, ToolCatalog
from tests.conftest import IN_CI
from tests.engine.conftest import core_and_deferred_tools


def mcp(server: str, tool: str, description: str, properties: dict | None = None, **extra) -> Tool:
    schema = {"type": "object", "properties": properties or {}}
    return Tool(name=f"mcp__{server}__{tool}", description=description, input_schema=schema, is_mcp=True, server=server, **extra)


@pytest.fixture
def small_catalog() -> ToolCatalog:
    return ToolCatalog(
        [
            mcp("weather", "get_forecast", "Get the weather forecast for a city for the next days.",
                {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}}),
            mcp("weather", "get_alerts", "Active severe weather alerts for a US state."),
            mcp("github", "create_issue", "Create a new issue in a GitHub repository.",
                {"repo": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}}),
            mcp("github", "list_pull_requests", "List open pull requests of a repository."),
            mcp("github", "search_code", "Search source code across repositories."),
            mcp("gitlab", "create_merge_request", "Open a merge request in a GitLab project."),
            mcp("time", "convert_time", "Convert a time between two time zones.",
                {"source_timezone": {"type": "string", "description": "IANA timezone name"}}),
            mcp("files", "read_file", "Read the complete contents of a file from disk."),
            mcp("files", "write_file", "Create a new file or overwrite an existing file with new content."),
            mcp("mail", "send_email", "Send an e-mail message to one or more recipients."),
            Tool(name="NotebookEdit", description="Edit a cell of a Jupyter notebook.", should_defer=True),
            Tool(name="Read", description="Read a file (always loaded, never searched)."),
        ]
    )


@pytest.fixture
def embeddings_dir(tmp_path, monkeypatch):
    """Each test gets its own on-disk embedding cache."""
    path = tmp_path / "embeddings"
    monkeypatch.setenv("TOOLSEARCH_CACHE_DIR", str(path))
    from playground.engine.search import embedding_cache

    monkeypatch.setattr(embedding_cache, "_shared_caches", {})
    return path


@pytest.fixture(scope="session")
def encoder():
    from playground.engine.search.encoder import EncoderUnavailable, shared_encoder

    try:
        return shared_encoder()
    except EncoderUnavailable as exc:
        if IN_CI:
            pytest.fail(f"the semantic extra is required under CI=true (make test installs EXTRAS=dev,semantic): {exc}")
        pytest.skip(f"semantic extra not installed: {exc}")


@pytest.fixture
def core_and_deferred_catalog() -> ToolCatalog:
    """The engine tests' catalog: core tools loaded, MCP tools of three servers deferred."""
    return core_and_deferred_tools()
