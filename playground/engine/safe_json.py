"""JSON parsing for text that people or remote peers send (catalog imports, tool-call arguments,
backend settings, socket messages).

The standard parser recurses once per nesting level (a 3,000-deep schema ends in RecursionError,
not a JSONDecodeError), converts an integer of any length (Python refuses over 4,300 digits with a
plain ValueError) and accepts NaN, Infinity and 1e309 (which PostgreSQL's jsonb then refuses).
`loads` refuses all of these with a `JSONDecodeError`, so every caller's existing
`except json.JSONDecodeError` turns them into a clear error for the person.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
MAX_INT_DIGITS = 64

# Strings (which may hold brackets) are skipped; only the brackets outside them count.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _first_too_deep(text: str, max_depth: int) -> int | None:
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        elif char in "]}":
            depth -= 1
    return None


class LimitedJSONDecoder(json.JSONDecoder):
    """A JSONDecoder with a nesting limit, an integer size limit and no NaN or Infinity.
    Usable as `cls=` of json.loads and as the `decoder` of Django's forms.JSONField."""

    max_depth = MAX_DEPTH
    max_int_digits = MAX_INT_DIGITS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parse_int", self._parse_int)
        kwargs.setdefault("parse_float", self._parse_float)
        kwargs.setdefault("parse_constant", self._parse_constant)
        super().__init__(*args, **kwargs)
        self._text = ""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        where = _first_too_deep(s, self.max_depth)
        if where is not None:
            raise json.JSONDecodeError(f"nested more than {self.max_depth} levels deep", s, where)
        self._text = s
        return super().decode(s, *args, **kwargs)

    def _refuse(self, message: str, token: str) -> None:
        where = self._text.find(token)
        raise json.JSONDecodeError(message, self._text, max(where, 0))

    def _parse_int(self, token: str) -> int:
        if len(token.lstrip("-")) > self.max_int_digits:
            self._refuse(f"an integer longer than {self.max_int_digits} digits", token)
        return int(token)

    def _parse_float(self, token: str) -> float:
        value = float(token)
        if not math.isfinite(value):
            self._refuse(f"the number {token[:20]}{'…' if len(token) > 20 else ''} is too large", token)
        return value

    def _parse_constant(self, token: str) -> float:
        self._refuse(f"{token} is not a JSON number", token)
        raise AssertionError  # unreachable: _refuse raises


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads with the limits above; raises json.JSONDecodeError for text over them."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    return json.loads(text, cls=LimitedJSONDecoder, **kwargs)


# -- storing what people and peers send -----------------------------------------------------------
# PostgreSQL keeps no NUL character in text or jsonb ("unsupported Unicode escape sequence"), and a
# JSON-escaped one (`\u0000`) passes every check of raw bytes. Every text and JSON column of the
# project stores it as these six visible characters instead: what was sent is shown, escaped, and
# the save never fails.
NUL = "\x00"
NUL_SHOWN = "\\u0000"


def without_nul(value: Any) -> Any:
    """`value` with every NUL character in its strings (dict keys included, at any depth) replaced
    by the visible escape `\\u0000`; the same object when it holds none."""
    return _replace_nul(value) if _holds_nul(value) else value


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(item) for item in value)
    return False


def _replace_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN)
    if isinstance(value, dict):
        return {_replace_nul(k): _replace_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_replace_nul(item) for item in value)
    return value
