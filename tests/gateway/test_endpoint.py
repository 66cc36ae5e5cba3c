"""The endpoint's request checks that need no server."""
from __future__ import annotations

import pytest

from playground.gateway.endpoint import origin_allowed
from playground.gateway.tokens import bearer_token


@pytest.mark.parametrize(("origin", "allowed", "expected"), [
    ("http://evil.example", [], False),
    ("http://localhost:6274", ["http://localhost:*"], True),
    ("http://localhost.evil.example:80", ["http://localhost:*"], False),
    ("http://localhost:6274", ["http://localhost:6274/"], True),
    ("https://localhost:6274", ["http://localhost:*"], False),
    ("http://127.0.0.1:8000", ["http://localhost:*"], False),
    ("null", ["http://localhost:*"], False),
])
def test_origins_are_matched_exactly_or_by_any_port(origin, allowed, expected):
    assert origin_allowed(origin, allowed) is expected


def test_only_a_bearer_header_carries_a_token():
    assert bearer_token("Bearer tsg_abc") == "tsg_abc"
    assert bearer_token("bearer   tsg_abc ") == "tsg_abc"
    assert bearer_token("Basic dXNlcg==") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None
