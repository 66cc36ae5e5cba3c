from __future__ import annotations

import pytest

from playground.engine.modes import decide_mode, is_first_party_base_url, parse_mode
from playground.engine.tokens import CharEstimateCounter

DEFERRED = [{"name": f"t{i}", "description": "x" * 240, "input_schema": {"type": "object"}} for i in range(10)]


def decide(mode, **kwargs):
    values = {"deferred_tools": DEFERRED, "token_counter": CharEstimateCounter(), "context_window": 200_000}
    values.update(kwargs)
    return decide_mode(mode, **values)


@pytest.mark.parametrize(
    ("raw", "kind", "percent"),
    [("", "unset", None), (None, "unset", None), ("TRUE", "true", None), ("false", "false", None), ("auto", "auto", 10), ("auto:25", "auto", 25), ("auto:250", "auto", 100), ("auto:-3", "auto", 0)],
)
def test_modes_parse_and_auto_percent_is_clamped(raw, kind, percent):
    setting = parse_mode(raw)
    assert (setting.kind, setting.percent) == (kind, percent)


@pytest.mark.parametrize("raw", ["maybe", "auto:", "auto:x", "auto:1.5"])
def test_invalid_modes_are_rejected_naming_the_accepted_values(raw):
    with pytest.raises(ValueError, match="true, false, auto or auto:N"):
        parse_mode(raw)


def test_unset_is_on_like_claude_code():
    decision = decide("")
    assert decision.enabled and decision.mode == "unset" and decision.deferred_tokens > 0


def test_false_is_off():
    assert decide("false").gate == "disabled"


def test_denied_toolsearch_switches_it_off_with_the_reason():
    decision = decide("true", tool_search_permitted=False)
    assert not decision.enabled and "denied" in decision.reason


def test_a_model_matching_the_no_tool_reference_patterns_is_off_in_the_native_style_only():
    assert decide("true", model="claude-3-5-haiku-latest").gate == "model-unsupported"
    assert decide("true", model="claude-3-5-haiku-latest", unsupported_model_patterns=["^gpt"]).enabled
    assert decide("true", model="claude-3-5-haiku-latest", planned_as="client").enabled


def test_an_unset_mode_behind_a_third_party_base_url_is_off_but_an_explicit_mode_wins():
    assert decide("", base_url="https://gateway.example.com/anthropic").gate == "third-party-base-url"
    assert decide("true", base_url="https://gateway.example.com").enabled
    assert decide("", base_url="https://api.anthropic.com").enabled
    assert is_first_party_base_url("") and not is_first_party_base_url("http://127.0.0.1:8080")


def test_nothing_deferred_means_off():
    assert decide("true", deferred_tools=[]).gate == "nothing-deferred"


@pytest.mark.parametrize("mode", ["", "true", "auto", "auto:50"])
def test_nothing_deferred_yet_but_servers_still_connecting_keeps_tool_search_on(mode):
    decision = decide(mode, deferred_tools=[], pending_mcp_servers=["jira", "linear"])
    assert (decision.enabled, decision.gate) == (True, "pending-servers")
    assert "jira, linear" in decision.reason


def test_pending_servers_do_not_override_an_explicit_off_or_a_denied_toolsearch():
    assert decide("false", deferred_tools=[], pending_mcp_servers=["jira"]).gate == "disabled"
    assert decide("true", deferred_tools=[], pending_mcp_servers=["jira"], tool_search_permitted=False).gate == "tool-search-denied"


def test_auto_turns_on_when_deferred_tokens_reach_floor_of_the_percentage_of_the_context_window():
    tokens = CharEstimateCounter().count_tools(DEFERRED)
    on = decide("auto:10", context_window=tokens * 10)  # threshold == tokens exactly
    assert on.enabled and on.threshold_tokens == tokens and on.deferred_tokens == tokens
    off = decide("auto:10", context_window=tokens * 10 + 10)
    assert not off.enabled and off.threshold_tokens == tokens + 1
    assert decide("auto:7", context_window=1000).threshold_tokens == 70
    assert decide("auto:3", context_window=999).threshold_tokens == 29  # floor(29.97)


def test_auto_zero_is_always_on_and_auto_hundred_always_off():
    assert decide("auto:0", context_window=10**9).enabled
    assert not decide("auto:100", context_window=1).enabled


def test_the_decision_serialises_everything_the_ui_shows():
    data = decide("auto").to_dict()
    assert set(data) >= {"enabled", "mode", "reason", "threshold_tokens", "deferred_tokens", "context_window", "percent"}
    assert data["mode"] == "auto:10"


def test_auto_weighs_the_saving_net_of_the_announcement():
    deferred_tokens = decide("auto").deferred_tokens
    window = deferred_tokens * 10  # auto:10 → the threshold is exactly the deferred tools' tokens
    on = decide("auto:10", context_window=window)
    assert on.enabled and on.announcement_tokens == 0
    off = decide("auto:10", context_window=window, announcement_tokens=1)
    assert not off.enabled and off.announcement_tokens == 1
    assert f"deferring saves {deferred_tokens - 1} tokens" in off.reason and "− 1 announcing them" in off.reason
