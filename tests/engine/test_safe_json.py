"""The JSON limits at the parse points of user input: refused with a JSONDecodeError that says why."""
from __future__ import annotations

import json

import pytest

from playground.engine import safe_json


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 3_000 + "]" * 3_000, "nested more than 64 levels deep"),
    ('{"a": ' + "1" * 5_000 + "}", "an integer longer than 64 digits"),
    ("[NaN]", "NaN is not a JSON number"),
    ("[-Infinity]", "-Infinity is not a JSON number"),
    ('{"w": 1e309}', "the number 1e309 is too large"),
])
def test_over_the_limits_is_a_decode_error_with_a_reason(text, message):
    with pytest.raises(json.JSONDecodeError, match=message):
        safe_json.loads(text)


def test_within_the_limits_is_plain_json():
    nested = "[" * 64 + "]" * 64
    assert safe_json.loads(nested) == json.loads(nested)
    assert safe_json.loads('{"a": "[[[[{{{{", "b": [1.5, -3, ' + "9" * 64 + "]}") == {"a": "[[[[{{{{", "b": [1.5, -3, int("9" * 64)]}
