from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


_PARTS = st.sampled_from(["github", "git", "a", "a_b", "b", "x-y", "create_issue", "create", "issue"])


@st.composite
def _names(draw):
    if draw(st.booleans()):
        return draw(st.sampled_from(["Read", "Write", "ToolSearch", "Agent"]))
    parts = draw(st.lists(_PARTS, min_size=2, max_size=3))
    return "mcp__" + "__".join(parts)


@st.composite
def _rules(draw):
    name = draw(_names())
    if name.startswith("mcp__"):
        server = name[len("mcp__"):].split("__")[0]
        pattern = draw(st.sampled_from([name, f"mcp__{server}", f"mcp__{server}__*"]))
    else:
        pattern = name
    return PermissionRule(draw(st.sampled_from(["allow", "ask", "deny"])), pattern, rule_id=draw(st.integers(0, 99)))


@settings(max_examples=300, deadline=None)
@given(rules=st.lists(_rules(), max_size=8), names=st.lists(_names(), min_size=1, max_size=8))
def test_decisions_are_those_of_trying_every_rule_in_order(rules, names):
    """The policy looks rules up by name and server prefix; it decides exactly as a scan of every
    rule in order (the strongest effect, the first such rule) would."""
    policy = PermissionPolicy(rules)
    for name in names:
        strongest = None
        for rule in rules:
            if rule.matches(name) and (strongest is None or
                                       ["allow", "ask", "deny"].index(rule.effect) > ["allow", "ask", "deny"].index(strongest.effect)):
                strongest = rule
        decision = policy.decide(name)
        assert decision.rule is strongest
        assert decision.effect == (strongest.effect if strongest else "allow")
