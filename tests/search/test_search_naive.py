"""The plain transcription of Claude Code's scorer: the reference the indexed backend is held to."""
from __future__ import annotations

from dataclasses import replace

from playground.engine.search.base import read_query
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.naive import NaiveKeywordBackend
from playground.engine.tools import Tool, ToolCatalog

from tests.engine.conftest import mcp


def test_it_precomputes_nothing():
    assert NaiveKeywordBackend().build_index(ToolCatalog([mcp("s", "a")])) is None


def test_the_full_name_rule_fires_only_for_a_hand_built_term_with_a_space_and_the_fast_backend_defers_to_it():
    # read_query never yields a term with a space, so in practice the +3 rule cannot fire (see keyword.py).
    catalog = ToolCatalog([mcp("github", "create_issue")])
    reading = replace(read_query("x"), optional=("github create",))
    naive = NaiveKeywordBackend().rank(reading, None, catalog, 5)
    fast = ClaudeCodeKeywordBackend().rank(reading, ClaudeCodeKeywordBackend().build_index(catalog), catalog, 5)
    assert [(s.name, s.score, s.breakdown[0].rule) for s in naive] == [("mcp__github__create_issue", 3, "full name contains term")]
    assert fast == naive


def test_the_full_name_rule_does_not_fire_once_the_tool_has_scored():
    catalog = ToolCatalog([Tool(name="GithubCreate", description="github", should_defer=True)])
    reading = replace(read_query("x"), optional=("github", "github create"))
    [only] = NaiveKeywordBackend().rank(reading, None, catalog, 5)
    assert only.score == 10 + 2  # exact part + description word; no +3 for the second term


def test_required_terms_filter_before_scoring():
    catalog = ToolCatalog([mcp("slack", "post"), mcp("github", "post")])
    assert NaiveKeywordBackend().search("+slack post", catalog).matches == ["mcp__slack__post"]
