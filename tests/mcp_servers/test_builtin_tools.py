"""Built-in tools: real behaviour, safe arithmetic, argument checks."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from playground.mcp_servers.builtin_sandbox import (
    BUILTIN_MEMORY_BYTES,
    HELPER_COMMAND,
    BuiltinSandbox,
    SandboxError,
)
from playground.engine.tools import validate_input_schema, validate_tool_name
from playground.mcp_servers.builtin_tools import (
    BUILTIN_TOOL_DEFINITIONS,
    BUILTIN_TOOL_NAMES,
    BUILTIN_TOOLS,
    MAX_EXPRESSION_LENGTH,
    MAX_INTEGER_BITS,
    BuiltinToolError,
    evaluate_arithmetic,
)


def test_the_definitions_are_valid_engine_tools():
    assert BUILTIN_TOOL_NAMES == ("echo", "word_count", "calculator", "random_number")
    for definition in BUILTIN_TOOL_DEFINITIONS:
        validate_tool_name(definition["name"])
        validate_input_schema(definition["input_schema"], tool_name=definition["name"])
        assert definition["description"]


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("2 ** 10", 1024), ("-4 // 3", -2), ("round(pi, 2)", 3.14), ("max(1, 5, 3)", 5)],
)
def test_the_calculator_computes(expression, value):
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "open('/etc/passwd')", "(1).__class__", "9 ** 9 ** 9", "1 / 0", "x + 1", "1 +", "'a' * 3"],
)
def test_the_calculator_refuses_anything_but_arithmetic(expression):
    with pytest.raises(BuiltinToolError):
        evaluate_arithmetic(expression)


def test_word_count_counts():
    text, structured = BUILTIN_TOOLS["word_count"].call({"text": "one two\nthree"})
    assert structured == {"words": 3, "characters": 13, "lines": 2}


def test_random_number_is_repeatable_with_a_seed_and_checks_its_range():
    tool = BUILTIN_TOOLS["random_number"]
    assert tool.call({"min": 1, "max": 1000, "seed": 7}) == tool.call({"min": 1, "max": 1000, "seed": 7})
    assert 5 <= tool.call({"min": 5, "max": 6})[1]["value"] <= 6
    with pytest.raises(BuiltinToolError, match="greater than max"):
        tool.call({"min": 10, "max": 1})


def test_arguments_are_validated_against_the_schema():
    with pytest.raises(BuiltinToolError, match="invalid arguments for echo"):
        BUILTIN_TOOLS["echo"].call({"text": 3})


# -- bounds: no argument can make a built-in run away ------------------------------------------------
# Generous: each expression takes microseconds; 2 s holds on a machine busy with other test runs.
EXPRESSION_DEADLINE_SECONDS = 2.0

_numbers = st.one_of(st.integers(min_value=0, max_value=10**6).map(str),
                     st.sampled_from(["9", "99", "999", "1000", "0.5", "1e308", "2", "pi", "e", "-1"]))


def _expressions(leaves):
    return st.one_of(
        st.tuples(leaves, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), leaves)
        .map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(st.sampled_from(["round", "sqrt", "exp", "log", "abs", "min", "max"]), leaves)
        .map(lambda t: f"{t[0]}({t[1]})"),
        leaves.map(lambda x: f"round(5, -{x})"),
        leaves.map(lambda x: f"-{x}"),
    )


@hypothesis_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_numbers, _expressions, max_leaves=12))
def test_every_generated_expression_is_answered_or_refused_within_a_bounded_time(expression):
    expression = expression[:MAX_EXPRESSION_LENGTH]
    started = time.perf_counter()
    try:
        value = evaluate_arithmetic(expression)
    except BuiltinToolError:
        value = None
    elapsed = time.perf_counter() - started
    assert elapsed < EXPRESSION_DEADLINE_SECONDS, f"{expression!r} took {elapsed:.2f} s"
    if isinstance(value, int):
        assert value.bit_length() <= MAX_INTEGER_BITS


@pytest.mark.parametrize("expression", [
    "((9**999)**999)**9", "((9**999)**999)**99", "(9**999)**999", "9**999*9**999*9**999", "round(5, -10**8)",
    "((2**1000)**1000)", "(10**999)*(10**999)*(10**999)",
])
def test_nested_powers_and_products_are_refused_fast(expression):
    started = time.perf_counter()
    with pytest.raises(BuiltinToolError, match="too large|at most"):
        evaluate_arithmetic(expression)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(("expression", "message"), [
    ("(-8)**0.5", "not a real number"), ("1e308*10", "too large"), ("exp(1000)", "too large"),
    ("1\x00", "NUL"), ("((((1", "not an arithmetic expression"),
])
def test_odd_results_and_inputs_are_clear_errors(expression, message):
    with pytest.raises(BuiltinToolError, match=message):
        evaluate_arithmetic(expression)


def test_big_but_bounded_arithmetic_still_works():
    assert evaluate_arithmetic("9**999") == 9**999
    assert evaluate_arithmetic("2**1000 * 2**1000") == 2**2000


def test_text_and_integer_arguments_are_bounded():
    with pytest.raises(BuiltinToolError, match="text longer than"):
        BUILTIN_TOOLS["echo"].call({"text": "x" * 1_000_001})
    with pytest.raises(BuiltinToolError, match="64-bit"):
        BUILTIN_TOOLS["random_number"].call({"min": 1, "max": 10**30})


def test_built_ins_run_in_a_helper_process_with_a_memory_limit():
    sandbox = BuiltinSandbox(max_helpers=1)
    try:
        assert sandbox.call("calculator", {"expression": "2 ** 10"}) == {
            "text": "2 ** 10 = 1024", "structured": {"expression": "2 ** 10", "value": 1024}}
        assert "too large" in sandbox.call("calculator", {"expression": "((9**999)**999)**9"})["error"]
        (helper,) = sandbox._idle
        limits = Path(f"/proc/{helper.process.pid}/limits").read_text()
        address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
        assert str(BUILTIN_MEMORY_BYTES) in address_space
    finally:
        sandbox.close()


def test_closing_the_idle_helpers_frees_their_places_for_new_ones():
    # The suite closes a process's helpers between modules; the places they held must come back, or
    # after a few closes every call waits for a helper that no longer exists ("every helper is busy").
    sandbox = BuiltinSandbox(max_helpers=1)
    try:
        for round_ in range(3):
            assert sandbox.call("echo", {"text": f"round {round_}"}, timeout=5)["text"] == f"round {round_}"
            sandbox.close()
            assert sandbox._started == 0 and not sandbox._idle
    finally:
        sandbox.close()


def test_a_runaway_helper_is_stopped_and_replaced():
    # A stand-in helper that says it is ready and then never answers: what a runaway looks like.
    stuck = [sys.executable, "-c", "import sys,time; print('ready', flush=True); sys.stdin.readline(); time.sleep(60)"]
    sandbox = BuiltinSandbox(max_helpers=1, command=stuck)
    try:
        started = time.perf_counter()
        with pytest.raises(SandboxError, match="stopped after 0.5 s"):
            sandbox.call("calculator", {"expression": "1"}, timeout=0.5)
        assert time.perf_counter() - started < 5
        assert sandbox._started == 0 and not sandbox._idle  # the stuck one is gone, a new one may start
        sandbox.command = HELPER_COMMAND
        assert sandbox.call("echo", {"text": "back"})["text"] == "back"
    finally:
        sandbox.close()
