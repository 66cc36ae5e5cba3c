"""The Claude Code keyword scorer: each rule, the explanations, and exact agreement with the plain transcription."""
from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.engine.catalog_io import load_catalog, load_queries
from playground.engine.search import keyword
from playground.engine.search.keyword import ClaudeCodeKeywordBackend, whole_word_keys
from playground.engine.search.naive import NaiveKeywordBackend
from playground.engine.search.names import matches_required_term, parse_tool_name
from playground.engine.tools import Tool, ToolCatalog

from tests.engine.conftest import mcp
from tests.engine.strategies import catalogs, queries

BACKENDS = [ClaudeCodeKeywordBackend, NaiveKeywordBackend]


def scored(backend_cls, query, catalog, max_results=10):
    return {s.name: s for s in backend_cls().search(query, catalog, max_results=max_results).scored}


@pytest.fixture(params=BACKENDS, ids=lambda cls: cls.name)
def backend(request):
    return request.param()


def test_an_exact_name_part_scores_12_for_mcp_tools_and_10_for_others(backend):
    catalog = ToolCatalog([mcp("github", "create_issue"), Tool(name="IssueTracker", should_defer=True)])
    result = {s.name: s for s in backend.search("issue", catalog).scored}
    assert result["mcp__github__create_issue"].score == 12
    assert result["IssueTracker"].score == 10
    assert result["IssueTracker"].breakdown[0].rule == "exact name part"


def test_a_substring_of_a_name_part_scores_6_for_mcp_tools_and_5_for_others(backend):
    catalog = ToolCatalog([mcp("github", "create_issues"), Tool(name="IssuesTracker", should_defer=True)])
    result = {s.name: s for s in backend.search("issue", catalog).scored}
    assert result["mcp__github__create_issues"].score == 6
    assert result["IssuesTracker"].score == 5
    assert result["IssuesTracker"].breakdown[0].detail == "issues"


def test_whole_words_score_4_in_the_search_hint_and_2_in_the_description(backend):
    catalog = ToolCatalog([Tool(name="Alpha", description="Open a notebook.", search_hint="jupyter notebook", should_defer=True)])
    [only] = backend.search("notebook jupyter notes", catalog).scored
    assert only.score == 4 + 2 + 4
    assert [(c.term, c.rule, c.points) for c in only.breakdown] == [
        ("notebook", "whole word in search hint", 4),
        ("notebook", "whole word in description", 2),
        ("jupyter", "whole word in search hint", 4),
    ]


def test_the_breakdown_adds_up_to_the_score(backend, core_and_deferred_catalog):
    for tool in backend.search("github create issue read message", core_and_deferred_catalog, max_results=10).scored:
        assert sum(c.points for c in tool.breakdown) == tool.score


def test_plus_slack_send_keeps_only_tools_matching_slack_and_ranks_by_both_terms(backend, core_and_deferred_catalog):
    result = backend.search("+slack send", core_and_deferred_catalog)
    assert result.matches == ["mcp__slack__post_message", "mcp__slack__list_channels"]
    assert result.scored[0].score == 12 + 2 + 2  # slack: name part + description; send: description


def test_a_required_term_that_nothing_matches_returns_nothing(backend, core_and_deferred_catalog):
    assert backend.search("+jira issue", core_and_deferred_catalog).matches == []


def test_ties_keep_catalog_order_and_max_results_cuts(backend):
    catalog = ToolCatalog([mcp("s", f"tool_{i}", "does things") for i in range(8)])
    result = backend.search("things", catalog, max_results=3)
    assert result.matches == ["mcp__s__tool_0", "mcp__s__tool_1", "mcp__s__tool_2"]


def test_only_deferred_tools_are_scored(backend, core_and_deferred_catalog):
    assert "Read" not in backend.search("read file", core_and_deferred_catalog, max_results=10).matches


def test_regex_metacharacters_are_matched_literally(backend):
    catalog = ToolCatalog([mcp("s", "a", "uses a.b and c++x"), mcp("s", "b", "uses axb")])
    assert backend.search("a.b", catalog).matches == ["mcp__s__a"]
    assert backend.search("c++", catalog).matches == ["mcp__s__a"]
    assert backend.search("(", catalog).matches == []


def test_repeated_terms_count_each_time(backend):
    catalog = ToolCatalog([mcp("s", "issue")])
    assert backend.search("issue issue", catalog).scored[0].score == 24


def test_whole_word_keys_hold_word_runs_and_interior_punctuation_without_spaces():
    assert whole_word_keys("-e-mail, c++ now.") == {"e", "-", "mail", "c", "now"}


def test_the_index_is_rebuilt_for_a_changed_catalog():
    backend = ClaudeCodeKeywordBackend()
    first = ToolCatalog([mcp("s", "alpha")])
    second = ToolCatalog([mcp("s", "alpha"), mcp("s", "beta")])
    assert backend.search("beta", first).matches == []
    assert backend.search("beta", second).matches == ["mcp__s__beta"]


# -- properties -----------------------------------------------------------------------------------

def property_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same_ranking(query, catalog, max_results):
    fast = ClaudeCodeKeywordBackend().search(query, catalog, max_results=max_results)
    slow = NaiveKeywordBackend().search(query, catalog, max_results=max_results)
    assert fast.matches == slow.matches
    assert [s.to_dict() for s in fast.scored] == [s.to_dict() for s in slow.scored]


@property_settings(150)
@given(catalog=catalogs(), query=queries(), max_results=st.integers(1, 6))
def test_the_indexed_scorer_returns_exactly_what_the_plain_transcription_returns(catalog, query, max_results):
    assert_same_ranking(query, catalog, max_results)


@pytest.mark.parametrize("gram", [1, 2])
@property_settings(60)
@given(catalog=catalogs(), query=queries(), max_results=st.integers(1, 6))
def test_the_other_index_paths_agree_too(catalog, query, max_results, gram):
    # Small random catalogs rarely reach the thresholds: force the pair-mask expansion, and short
    # grams so that most terms go through trigram-style intersection and candidate checks.
    with mock.patch.object(keyword, "_FEW_PARTS", 0), mock.patch.object(keyword, "_GRAM", gram), mock.patch.object(keyword, "_GRAMS_INTERSECTED", 2):
        assert_same_ranking(query, catalog, max_results)


def test_the_indexed_scorer_agrees_on_a_real_catalog_with_real_and_keyword_queries(shared_toolsets):
    catalog = load_catalog(shared_toolsets / "mcp-combined" / "catalog.jsonl")
    texts = [q.query for q in load_queries(shared_toolsets / "mcp-combined" / "queries.jsonl")][:12]
    texts += ["a", "e", "get", "+file read", "search web", "c++", "don't", "pdf,", "-", "issue +github", "tion"]
    for text in texts:
        assert_same_ranking(text, catalog, 10)


@property_settings(100)
@given(catalog=catalogs(), query=st.one_of(queries(), st.text()), max_results=st.integers(1, 6))
def test_keyword_results_are_sorted_deferred_required_matching_and_bounded(catalog, query, max_results):
    result = ClaudeCodeKeywordBackend().search(query, catalog, max_results=max_results)
    if result.reading.kind == "select":
        return
    assert len(result.matches) <= max_results
    if result.reading.kind == "exact":
        assert result.matches[0].lower() == query.strip().lower() or len(result.matches) == 1
        return
    assert all(catalog.is_deferred(name) for name in result.matches)
    scores = [s.score for s in result.scored]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    for name in result.matches:
        tool = catalog.get(name)
        for term in result.reading.required:
            assert matches_required_term(parse_tool_name(name), term, tool.description.lower(), tool.search_hint.lower())


@property_settings(40)
@given(catalog=catalogs(min_size=1, max_size=6), picks=st.lists(st.one_of(st.text(max_size=6), st.just("")), max_size=4), data=st.data())
def test_select_returns_exactly_the_existing_named_tools_in_order(catalog, picks, data):
    names = data.draw(st.lists(st.sampled_from([t.name for t in catalog]), max_size=4))
    requested = [n for pair in zip(names, picks) for n in pair] + names[len(picks):]
    requested = [n for n in requested if "," not in n]
    result = ClaudeCodeKeywordBackend().search("select:" + ",".join(requested), catalog)
    expected = []
    for name in (n.strip() for n in requested):
        if name in catalog and name not in expected:
            expected.append(name)
    assert result.matches == expected
