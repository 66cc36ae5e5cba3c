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


class _Server:
    def __init__(self, name: str) -> None:
        self.name = name


def test_a_uri_two_servers_offer_is_read_by_its_qualified_address_never_picked_silently(monkeypatch):
    from playground.gateway import upstream

    one, two = _Server("one"), _Server("two")
    shared = upstream.Listing(resources=[{"uri": "file:///README.md", "name": "readme"}], resource_templates=[], prompts=[])
    alone = upstream.Listing(resources=[{"uri": "file:///only-two.md", "name": "x"}], resource_templates=[], prompts=[])
    listings = {"one": shared, "two": upstream.Listing(shared.resources + alone.resources, [], [])}
    monkeypatch.setattr(upstream, "listing", lambda server: listings[server.name])

    listed = upstream.resources([one, two])
    assert [r["uri"] for r in listed] == ["mcp-server://one/file%3A%2F%2F%2FREADME.md",
                                          "mcp-server://two/file%3A%2F%2F%2FREADME.md",
                                          "mcp-server://two/file%3A%2F%2F%2Fonly-two.md"]
    assert listed[0]["_meta"] == {"toolsearch/server": "one", "toolsearch/uri": "file:///README.md"}
    assert upstream.owner_of([one, two], listed[1]["uri"]) == (two, "file:///README.md")
    assert upstream.owner_of([one, two], "file:///only-two.md") == (two, "file:///only-two.md")
    with pytest.raises(UpstreamError, match="2 MCP servers offer 'file:///README.md'; read it as one of "
                                            "mcp-server://one/") as ambiguous:
        upstream.owner_of([one, two], "file:///README.md")
    assert ambiguous.value.not_offered
    with pytest.raises(UpstreamError, match="'three' is not an MCP server this profile may use"):
        upstream.owner_of([one, two], "mcp-server://three/file%3A%2F%2F%2FREADME.md")
