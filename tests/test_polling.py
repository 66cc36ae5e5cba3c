"""The tests' one polling helper: returns the condition's first truthy value, fails after its deadline."""
from __future__ import annotations

import itertools
import time

import pytest

from tests.polling import wait_until


def test_it_returns_the_first_truthy_value():
    calls = itertools.count()
    assert wait_until(lambda: [n for n in [next(calls)] if n >= 3], "the third call", 5, interval=0.001) == [3]


def test_it_fails_after_its_deadline_naming_what_it_waited_for_and_the_details():
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0.2 s: the impossible\nwhat was seen"):
        wait_until(lambda: None, "the impossible", 0.2, details=lambda: "what was seen")
    assert 0.2 <= time.monotonic() - started < 5
