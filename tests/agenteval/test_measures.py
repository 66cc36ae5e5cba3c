"""The engine's task measures and statistics on hand-built events with known answers."""
from __future__ import annotations

import pytest

from playground.engine.agent_measures import (
    measure_task, mcnemar_exact, paired_comparison, profile_summary, wilson_interval,
)

GOLD = "mcp__time__get_current_time"
ALT = "mcp__clock__now"


def turn(model="claude-sonnet-4-5", provider="anthropic", subagent=""):
    return ("turn_started", {"model": model, "provider": provider, "subagent": subagent})


def response(input_tokens=1000, output=50, write=0, read=0, usage_source=None):
    payload = {"usage": {"input": input_tokens, "output": output, "cache_write": write, "cache_read": read}}
    return ("model_response", payload if usage_source is None else {**payload, "usage_source": usage_source})


def call(name, use_id):
    return ("tool_call", {"tool_use_id": use_id, "name": name})


def result(name, use_id, *, error="", is_error=False, simulated=False, refusal=None):
    payload = {"tool_use_id": use_id, "name": name, "is_error": is_error or bool(error) or bool(refusal), "error": error,
               "simulated": simulated}
    return ("tool_result", payload if refusal is None else {**payload, "refusal": refusal})


def test_search_then_the_gold_tool_is_a_first_call_success_with_priced_tokens():
    events = [
        turn(), response(), ("toolsearch_query", {"query": "time"}),
        turn(), response(), call(GOLD, "t1"), result(GOLD, "t1", simulated=True),
        turn(), response(output=80), ("turn_finished", {"final": True, "reason": "end_turn"}),
    ]
    m = measure_task(events, [GOLD], wall_s=1.25)
    assert (m.success, m.first_call_success, m.first_tool) == (True, True, GOLD)
    assert (m.searches, m.turns, m.input_tokens, m.output_tokens) == (1, 3, 3000, 180)
    # Sonnet 4.5: 3,000 × $3/M + 180 × $15/M.
    assert m.cost_usd == pytest.approx(0.009 + 0.0027)
    assert (m.errors, m.end_reason, m.simulated_calls, m.wall_s, m.tokens_estimated) == ({}, "end_turn", 1, 1.25, False)
    assert (m.provider, m.model) == ("anthropic", "claude-sonnet-4-5")


def test_an_equivalent_name_counts_a_wrong_first_pick_and_errors_by_kind():
    events = [
        turn(), response(),
        call("mcp__weather__get_forecast", "a"), result("mcp__weather__get_forecast", "a"),
        call(GOLD, "b"), result(GOLD, "b", error="deferred tool called before it was loaded", refusal="deferred"),
        call(ALT, "c"), result(ALT, "c"),
        ("error", {"kind": "max_turns"}),
    ]
    m = measure_task(events, [GOLD], {GOLD: [ALT]})
    assert m.success and m.gold_called == [ALT]
    assert not m.first_call_success and m.first_tool == "mcp__weather__get_forecast"
    assert m.errors == {"max_turns": 1, "tool_not_loaded": 1}


def test_a_gold_first_call_that_failed_is_no_first_call_success():
    events = [turn(), response(), call(GOLD, "a"), result(GOLD, "a", error=f"Tool {GOLD!r} is not available.", refusal="denied")]
    m = measure_task(events, [GOLD])
    assert (m.success, m.first_call_success, m.errors) == (False, False, {"permission_denied": 1})


def test_errors_are_counted_by_the_code_on_the_result_not_by_its_words():
    named = "mcp__audit__list_denied_logins"  # the words "denied" and "cancelled" in a tool's name or output mean nothing
    events = [turn(), response(),
              call(named, "a"), result(named, "a", error=f"Tool {named!r} does not exist or is not available in this conversation.",
                                       refusal="unknown"),
              call("mcp__shop__cancelled_orders", "b"), result("mcp__shop__cancelled_orders", "b", is_error=True),
              call(GOLD, "c"), result(GOLD, "c", error="The person denied permission to use it.", refusal="person_denied"),
              call(GOLD, "d"), result(GOLD, "d", error="Cancelled by the person while it ran.", refusal="cancelled"),
              call(GOLD, "e"), result(GOLD, "e", error="Permission to use it was not granted.", refusal="prompt_timeout"),
              call("ToolSearch", "f"), result("ToolSearch", "f", error="ToolSearch is not available.", refusal="server_search")]
    assert measure_task(events, [GOLD]).errors == {"cancelled": 1, "permission_denied": 2, "tool_error": 2, "unknown_tool": 1}


def test_a_result_saved_before_codes_reads_by_the_loops_own_note():
    named = "mcp__audit__list_denied_logins"
    old = [turn(), response(),
           call(GOLD, "a"), result(GOLD, "a", error="deferred tool called before it was loaded"),
           call(named, "b"), result(named, "b", error=f"Tool {named!r} does not exist or is not available in this conversation."),
           call(GOLD, "c"), result(GOLD, "c", error=f"Tool {GOLD!r} is not available: it is denied by a permission rule."),
           call(GOLD, "d"), result(GOLD, "d", error="Permission to use x was not granted: nobody answered within 5 seconds."),
           call(GOLD, "e"), result(GOLD, "e", error="cancelled while it ran"),
           call(GOLD, "f"), result(GOLD, "f", is_error=True)]  # a tool's own error: no note
    # The word "denied" in the unknown tool's name no longer makes it a permission denial.
    assert measure_task(old, [GOLD]).errors == {"cancelled": 1, "permission_denied": 2, "tool_error": 1, "tool_not_loaded": 1,
                                                "unknown_tool": 1}


def test_cache_parts_are_input_and_priced_apart_and_the_demo_is_marked_estimated():
    events = [turn(provider="demo"), response(input_tokens=100, output=10, write=1000, read=10_000, usage_source="estimate")]
    m = measure_task(events, [GOLD])
    assert (m.input_tokens, m.cache_write_tokens, m.cache_read_tokens, m.tokens_estimated) == (11_100, 1000, 10_000, True)
    # 100 × 3 + 10 × 15 + 1,000 × 3.75 + 10,000 × 0.30, per million.
    assert m.cost_usd == pytest.approx((300 + 150 + 3750 + 3000) / 1e6)


def test_the_response_says_whether_its_usage_is_an_estimate_on_either_wire():
    # The regression: only the "demo" key was known to estimate, so the demo agent on OpenAI's wire read as reported.
    assert measure_task([turn(provider="demo-openai"), response(usage_source="estimate")], [GOLD]).tokens_estimated
    assert not measure_task([turn(provider="anthropic"), response(usage_source="reported")], [GOLD]).tokens_estimated
    # A response saved before responses said so: its provider, as the caller knows them.
    old = [turn(provider="demo-openai"), response()]
    assert measure_task(old, [GOLD], estimating_providers=frozenset({"demo", "demo-openai"})).tokens_estimated
    assert not measure_task([turn(provider="anthropic"), response()], [GOLD],
                            estimating_providers=frozenset({"demo", "demo-openai"})).tokens_estimated


def test_the_cache_strip_prices_a_one_hour_write_and_an_openai_split_and_the_raw_cost_stays_beside_it():
    strip = ("cache_strip", {"vendor": "anthropic", "ttl": "1h"})
    m = measure_task([turn(), response(input_tokens=100, output=10, write=1000, read=10_000), strip], [GOLD])
    # 100 × 3 + 10 × 15 + 1,000 × 6 (a 1-hour write) + 10,000 × 0.30, per million.
    assert m.cost_usd == pytest.approx((300 + 150 + 6000 + 3000) / 1e6)
    assert m.uncached_cost_usd == pytest.approx((11_100 * 3 + 150) / 1e6)  # every input token at the input price
    # OpenAI's usage is stored as Claude's (its provider takes the cached part out of the prompt's
    # count: 5,000 prompt tokens with 4,096 cached are stored as 904 + 4,096), so nothing counts twice.
    openai = ("cache_strip", {"vendor": "openai", "ttl": "5m"})
    m = measure_task([turn(), response(input_tokens=904, output=0, write=0, read=4096), openai], [GOLD])
    assert (m.input_tokens, m.cache_read_tokens) == (5000, 4096)
    assert m.cost_usd == pytest.approx((904 * 3 + 4096 * 0.3) / 1e6)


def test_a_model_without_a_price_gives_no_cost_rather_than_zero():
    m = measure_task([turn(model="claude-test"), response()], [GOLD])
    assert m.cost_usd is None and m.unpriced_models == ["claude-test"]


def test_subagent_turns_are_not_model_turns_of_the_task():
    m = measure_task([turn(), response(), turn(subagent="research"), response()], [GOLD])
    assert m.turns == 1 and m.input_tokens == 2000  # its tokens are still paid


@pytest.mark.parametrize("k, n, expected", [
    (3, 4, (0.3006, 0.9544)), (2, 4, (0.1500, 0.8500)), (0, 10, (0.0, 0.2775)), (10, 10, (0.7225, 1.0)), (0, 0, (0.0, 0.0)),
])
def test_wilson_intervals_match_the_published_values(k, n, expected):
    assert wilson_interval(k, n) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("only_a, only_b, p", [(0, 0, 1.0), (1, 0, 1.0), (0, 6, 0.03125), (2, 8, 112 / 1024), (5, 5, 1.0)])
def test_exact_mcnemar(only_a, only_b, p):
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p)


def test_profile_summary_and_pairs_count_completed_tasks_only():
    done = {"success": True, "first_call_success": False, "searches": 2, "turns": 3, "input_tokens": 900,
            "output_tokens": 30, "cost_usd": 0.01, "wall_s": 2.0, "errors": {"tool_error": 1}}
    failed = {**done, "success": False, "searches": 0, "turns": 1, "input_tokens": 100, "cost_usd": 0.002, "wall_s": 1.0,
              "errors": {}}
    row = profile_summary("on", "anthropic", [{"status": "done", "measures": done}, {"status": "done", "measures": failed},
                                              {"status": "cancelled", "measures": None}, {"status": "pending", "measures": None}])
    assert row["tasks"] == 4 and row["completed"] == 2
    assert (row["success"], row["first_call_success"], row["searches_per_task"], row["turns_per_task"]) == (0.5, 0.0, 1.0, 2.0)
    assert (row["input_tokens_per_task"], row["cost_usd_per_task"], row["task_p50_s"]) == (500.0, 0.006, 1.5)
    assert row["errors"] == {"tool_error": 1} and row["success_ci"] == pytest.approx([0.0945, 0.9055], abs=1e-4)
    pair = paired_comparison("on", "off", {1: True, 2: True, 3: False}, {1: False, 2: True, 4: True})
    assert pair == {"a": "on", "b": "off", "tasks": 2, "only_a": 1, "only_b": 0, "success_diff": 0.5, "p_value": 1.0}


def test_a_worker_lost_is_an_error_only_when_the_run_did_not_go_on():
    lost = ("error", {"kind": "worker_lost"})
    went_on = ("status", {"status": "running", "note": "its worker stopped answering: task run 1 goes on"})
    resumed = measure_task([turn(), lost, went_on, turn(), response(), call(GOLD, "t1"), result(GOLD, "t1"),
                            ("turn_finished", {"final": True, "reason": "end_turn"})], [GOLD])
    assert (resumed.resumed, resumed.errors, resumed.success, resumed.turns) == (1, {}, True, 2)
    given_up = measure_task([turn(), lost, went_on, turn(), lost], [GOLD])
    assert (given_up.resumed, given_up.errors, given_up.success) == (1, {"worker_lost": 1}, False)
    # Another status (a cancel asked for) is not the run going on.
    cancelled = measure_task([turn(), lost, ("status", {"status": "cancelling"})], [GOLD])
    assert (cancelled.resumed, cancelled.errors) == (0, {"worker_lost": 1})
