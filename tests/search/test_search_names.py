from __future__ import annotations

import pytest

from playground.engine.search.names import matches_required_term, parse_tool_name, whole_word_pattern


def test_an_mcp_name_loses_its_prefix_and_splits_on_double_then_single_underscores():
    parsed = parse_tool_name("mcp__github__create_issue")
    assert parsed.parts == ("github", "create", "issue")
    assert parsed.full == "github create issue"
    assert parsed.is_mcp


def test_a_builtin_name_splits_on_camel_case():
    parsed = parse_tool_name("FileReadTool")
    assert parsed.parts == ("file", "read", "tool")
    assert not parsed.is_mcp


def test_a_builtin_name_splits_on_underscores_and_keeps_acronyms_together():
    assert parse_tool_name("get_HTTPStatus").parts == ("get", "httpstatus")
    assert parse_tool_name("web_fetch").parts == ("web", "fetch")


def test_hyphens_stay_inside_a_part():
    assert parse_tool_name("mcp__bing-cn-mcp__bing_search").parts == ("bing-cn-mcp", "bing", "search")


def test_the_full_mcp_name_keeps_claude_codes_spacing_for_odd_underscores():
    assert parse_tool_name("mcp__a___b").full == "a  b"
    assert parse_tool_name("mcp__a___b").parts == ("a", "b")


@pytest.mark.parametrize(
    ("term", "text", "expected"),
    [
        ("file", "read a file now", True),
        ("file", "read files now", False),
        ("caf", "café au lait", True),  # é is not an ASCII word character, as in JavaScript's \b
        ("c++", "write c++ code", False),  # \b after '+' needs a word character next
        ("c++", "c++x", True),
        ("a.b", "see a.b here", True),
        ("a.b", "see axb here", False),  # the dot is literal
        ("-", "e-mail", True),
        ("-", "a - b", False),
    ],
)
def test_whole_word_follows_javascript_word_boundaries_with_literal_terms(term, text, expected):
    assert bool(whole_word_pattern(term).search(text)) is expected


def test_a_required_term_matches_a_name_part_substring_or_a_whole_word_in_description_or_hint():
    parsed = parse_tool_name("mcp__slack__post_message")
    assert matches_required_term(parsed, "slack", "", "")
    assert matches_required_term(parsed, "mess", "", "")
    assert matches_required_term(parsed, "send", "send a message", "")
    assert matches_required_term(parsed, "chat", "", "team chat")
    assert not matches_required_term(parsed, "sen", "send a message", "")
