"""Built-in tools: harmless, real behaviour, run in-process by the executor.

`BUILTIN_TOOL_DEFINITIONS` lists their names, descriptions and schemas so demo data can create
the matching `registry.Tool` rows (source=builtin). Time is deliberately not here: the
`mcp-server-time` MCP server provides it.
"""
from __future__ import annotations

import ast
import math
import operator
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema


class BuiltinToolError(ValueError):
    """Bad arguments or an impossible request: becomes an is_error result with this message."""


@dataclass(frozen=True)
class BuiltinTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[dict[str, Any]], tuple[str, dict[str, Any] | None]]  # → (text, structured)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def call(self, arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        try:
            jsonschema.validate(arguments, self.input_schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
            raise BuiltinToolError(f"invalid arguments for {self.name} ({where}): {exc.message}") from None
        return self.run(arguments)


# The text tools take at most this much text (a megabyte of characters: milliseconds of work).
MAX_TEXT_CHARS = 1_000_000
# random_number's bounds and seed: 64-bit integers.
MAX_INTEGER_ARGUMENT = 2**63 - 1


def _bounded_text(arguments: dict[str, Any]) -> str:
    text = arguments["text"]
    if len(text) > MAX_TEXT_CHARS:
        raise BuiltinToolError(f"text longer than {MAX_TEXT_CHARS:,} characters")
    return text


def _echo(arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    return _bounded_text(arguments), None


_WORD = re.compile(r"\b\w+\b", re.UNICODE)


def _word_count(arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    text = _bounded_text(arguments)
    counts = {
        "words": len(_WORD.findall(text)),
        "characters": len(text),
        "lines": len(text.splitlines()) if text else 0,
    }
    return f"{counts['words']} words, {counts['characters']} characters, {counts['lines']} lines", counts


# Safe arithmetic: only numbers, + - * / // % ** and a few math functions; no names, no attributes.
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log, "exp": math.exp,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPRESSION_LENGTH = 200
MAX_EXPONENT = 1000
# Every integer the calculator makes, the result and each intermediate, stays within this many bits
# (about 2,500 digits: 9**999 fits, (9**999)**999 does not). An operation whose result could be
# larger is refused *before* it runs, from its operands' sizes, so no expression can cost more than
# a few multiplications of numbers this size: microseconds, a few kilobytes.
MAX_INTEGER_BITS = 8192
# round(x, n) computes 10**|n| for a negative n: bounded like any power.
MAX_ROUND_DIGITS = 300


def evaluate_arithmetic(expression: str) -> float | int:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise BuiltinToolError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
    if "\x00" in expression:
        raise BuiltinToolError("not an arithmetic expression: it contains a NUL character")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise BuiltinToolError(f"not an arithmetic expression: {exc.msg}") from None
    except (ValueError, MemoryError, RecursionError):
        raise BuiltinToolError("not an arithmetic expression: too deeply nested") from None
    return _checked(_evaluate(tree.body))


def _too_large() -> BuiltinToolError:
    return BuiltinToolError(f"result too large: the calculator keeps integers within {MAX_INTEGER_BITS} bits "
                            f"(about {int(MAX_INTEGER_BITS * math.log10(2)):,} digits) and decimals within ±1.8e308")


def _checked(value: Any) -> Any:
    """Every value the calculator makes: a real number, an integer within MAX_INTEGER_BITS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BuiltinToolError("the result is not a real number (a negative number to a fractional power?)")
    if isinstance(value, int) and value.bit_length() > MAX_INTEGER_BITS:
        raise _too_large()
    if isinstance(value, float) and not math.isfinite(value):
        raise _too_large()
    return value


def _bits(value: Any) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _refuse_oversized(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse an integer operation whose result could exceed MAX_INTEGER_BITS, from the operands'
    sizes alone (the product's bits are at most the sum of its factors'; a power's at most the
    base's times the exponent). Float operations are constant-time and overflow to an error."""
    if isinstance(op, ast.Pow):
        if abs(right) > MAX_EXPONENT:
            raise BuiltinToolError(f"exponent larger than {MAX_EXPONENT}")
        if isinstance(left, int) and isinstance(right, int) and right > 0 and _bits(left) * right > MAX_INTEGER_BITS + right:
            raise _too_large()
    elif isinstance(op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
        if _bits(left) + _bits(right) > MAX_INTEGER_BITS + 1:
            raise _too_large()


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return _checked(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _refuse_oversized(node.op, left, right)
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise BuiltinToolError("division by zero") from None
        except OverflowError:
            raise _too_large() from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords:
        arguments = [_evaluate(a) for a in node.args]
        if node.func.id == "round" and len(arguments) == 2 and isinstance(arguments[1], int) \
                and abs(arguments[1]) > MAX_ROUND_DIGITS:
            raise BuiltinToolError(f"round: at most {MAX_ROUND_DIGITS} digits either side of the point")
        try:
            return _checked(_FUNCTIONS[node.func.id](*arguments))
        except OverflowError:
            raise _too_large() from None
        except (ValueError, TypeError) as exc:
            raise BuiltinToolError(f"{node.func.id}: {exc}") from None
    raise BuiltinToolError(f"unsupported element in expression: {ast.dump(node)[:60]}")


def _calculator(arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    value = evaluate_arithmetic(arguments["expression"])
    return f"{arguments['expression']} = {value}", {"expression": arguments["expression"], "value": value}


def _random_number(arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    low, high = arguments.get("min", 1), arguments.get("max", 100)
    for name in ("min", "max", "seed"):
        if abs(arguments.get(name, 0)) > MAX_INTEGER_ARGUMENT:
            raise BuiltinToolError(f"{name} must be a 64-bit integer (at most {MAX_INTEGER_ARGUMENT} either way)")
    if low > high:
        raise BuiltinToolError(f"min ({low}) is greater than max ({high})")
    generator = random.Random(arguments["seed"]) if "seed" in arguments else random.SystemRandom()
    value = generator.randint(low, high)
    return str(value), {"value": value, "min": low, "max": high}


BUILTIN_TOOLS: dict[str, BuiltinTool] = {
    tool.name: tool
    for tool in [
        BuiltinTool(
            "echo",
            "Return the given text unchanged. Useful to check that tool calls work.",
            {"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo back"}}, "required": ["text"]},
            _echo,
        ),
        BuiltinTool(
            "word_count",
            "Count the words, characters and lines of a text.",
            {"type": "object", "properties": {"text": {"type": "string", "description": "The text to count"}}, "required": ["text"]},
            _word_count,
        ),
        BuiltinTool(
            "calculator",
            "Evaluate an arithmetic expression safely: numbers, + - * / // % **, parentheses, pi, e, "
            "and sqrt, abs, round, min, max, sin, cos, tan, log, exp.",
            {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "For example: (2 + 3) * sqrt(16)"}},
                "required": ["expression"],
            },
            _calculator,
        ),
        BuiltinTool(
            "random_number",
            "Pick a random integer between min and max (inclusive); give a seed for a repeatable result.",
            {
                "type": "object",
                "properties": {
                    "min": {"type": "integer", "description": "Lowest value (default 1)"},
                    "max": {"type": "integer", "description": "Highest value (default 100)"},
                    "seed": {"type": "integer", "description": "Optional seed for a repeatable pick"},
                },
            },
            _random_number,
        ),
    ]
}

BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(BUILTIN_TOOLS)
BUILTIN_TOOL_DEFINITIONS: list[dict[str, Any]] = [tool.definition() for tool in BUILTIN_TOOLS.values()]
