from __future__ import annotations

import pytest

from playground.engine.permissions import PermissionPolicy, PermissionRule, validate_pattern


def test_no_rule_means_allowed():
    decision = PermissionPolicy().decide("Read")
    assert decision.effect == "allow" and decision.rule is None


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("Read", "Read", True),
        ("Read", "ReadFile", False),
        ("mcp__github", "mcp__github__create_issue", True),
        ("mcp__github", "mcp__githubx__create_issue", False),
        ("mcp__github__*", "mcp__github__create_issue", True),
        ("mcp__github__*", "mcp__gitlab__create_issue", False),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__create_issues", False),
    ],
)
def test_patterns_match_an_exact_name_a_whole_server_or_a_server_wildcard(pattern, name, expected):
    assert PermissionRule("deny", pattern).matches(name) is expected


def test_deny_wins_over_ask_wins_over_allow_whatever_the_order():
    rules = [PermissionRule("allow", "mcp__github"), PermissionRule("ask", "mcp__github__*"), PermissionRule("deny", "mcp__github__delete_repo")]
    policy = PermissionPolicy(rules)
    assert policy.decide("mcp__github__delete_repo").effect == "deny"
    assert policy.decide("mcp__github__create_issue").effect == "ask"
    assert PermissionPolicy(rules[:1]).decide("mcp__github__x").effect == "allow"
    assert "deny mcp__github__delete_repo" in policy.decide("mcp__github__delete_repo").reason


def test_filter_removes_denied_tools_and_keeps_ask_tools_flagged(small_catalog):
    policy = PermissionPolicy([PermissionRule("deny", "mcp__slack"), PermissionRule("ask", "Bash")])
    result = policy.filter(small_catalog)
    assert "mcp__slack__post_message" not in result.permitted
    assert result.excluded_names == ["mcp__slack__post_message", "mcp__slack__list_channels"]
    assert result.ask == ["Bash"] and "Bash" in result.permitted


def test_rules_can_be_narrowed_to_scopes():
    policy = PermissionPolicy([PermissionRule("deny", "Bash", scope="reviewer"), PermissionRule("deny", "Read")])
    assert policy.for_scopes("global").decide("Bash").effect == "allow"
    assert policy.for_scopes("global", "reviewer").decide("Bash").effect == "deny"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "non-empty"),
        ("mcp__*", "only wildcard form"),
        ("Bash*", "only wildcard form"),
        ("has space", "not a tool name"),
        (" Read", "whitespace"),
        ("mcp__", "names no server"),
        ("x" * 65, "not a tool name"),
    ],
)
def test_invalid_patterns_are_rejected_with_a_reason(pattern, message):
    with pytest.raises(ValueError, match=message):
        validate_pattern(pattern)


def test_an_unknown_effect_is_rejected():
    with pytest.raises(ValueError, match="effect"):
        PermissionRule("maybe", "Read")
