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
