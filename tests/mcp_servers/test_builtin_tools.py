"""Built-in tools: real behaviour, safe arithmetic, argument checks."""
from __future__ import annotations

import pytest

from playground.engine.tools import validate_input_schema, validate_tool_name
from playground.mcp_servers.builtin_tools import (
    BUILTIN_TOOL_DEFINITIONS,
    BUILTIN_TOOL_NAMES,
    BUILTIN_TOOLS,
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
