"""Which upstream server a resource URI belongs to: RFC 6570 templates matched without a server."""
from __future__ import annotations

import pytest

from playground.gateway.upstream import MAX_URI_CHARS, UpstreamError, owner_of, template_matches


@pytest.mark.parametrize(("template", "uri", "expected"), [
    ("demo://city/{name}", "demo://city/tokyo", True),
    ("demo://city/{name}", "demo://city/", False),
    ("demo://city/{name}", "demo://city/a/b", False),  # a simple expansion holds no slash
    ("file:///{+path}", "file:///etc/hosts", True),  # a reserved one may
    ("repo://{owner}/{repo}/issues", "repo://octo/playground/issues", True),
    ("repo://{owner}/{repo}/issues", "repo://octo/playground/pulls", False),
    ("a.b://{x}", "aXb://y", False),  # literal parts are literal, not patterns
])
def test_a_uri_matches_the_templates_it_expands(template, uri, expected):
    assert template_matches(template, uri) is expected


def test_an_endless_uri_is_refused_before_any_template_sees_it():
    with pytest.raises(UpstreamError, match="at most 2000 characters") as refused:
        owner_of([], "demo://city/" + "a" * MAX_URI_CHARS)
    assert refused.value.not_offered
