"""A tool named in a request ranks first, in every backend (base.SearchBackend.search → mentions.py):
its whole name, its own name after mcp__<server>__, or the words of its name; siblings whose
descriptions match the request's words better stay below it."""
from __future__ import annotations

import pytest

from playground.engine.search.backends import get_backend
from playground.engine.search.mentions import MENTION_RULE, mention_index
from playground.engine.tools import Tool, ToolCatalog
from tests.search.conftest import mcp

BACKENDS = ["claude-code", "naive", "bm25", "semantic", "hybrid", "hybrid-pooled"]


@pytest.fixture
def catalog() -> ToolCatalog:
    # The siblings' descriptions repeat the request's words; the named tool's barely does.
    return ToolCatalog([
        mcp("code", "search_code", "Find a symbol in code: find symbol definitions, symbol references, any symbol."),
        mcp("code", "grep_symbols", "Find symbol names matching a pattern; symbol search and symbol lookup."),
        mcp("lsp", "find_symbol", "Locate a declaration by its identifier."),
        mcp("tracker", "create_issue", "Open a ticket."),
        mcp("other", "create_issue", "Open a ticket elsewhere."),
        mcp("tracker", "file_bug", "Create an issue: create a new issue, report an issue, file an issue."),
        Tool(name="WebFetch", description="Download a page.", should_defer=True),
        Tool(name="Crawler", description="Fetch web pages: web fetch, fetch a web page, fetch the web.", should_defer=True),
        Tool(name="Weather", description="Today's weather.", should_defer=True),
        Tool(name="Forecast", description="Weather forecast: the weather of the week, weather weather.", should_defer=True),
    ])


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param in ("semantic",):
        request.getfixturevalue("encoder")
    request.getfixturevalue("embeddings_dir")
    return get_backend(request.param)


@pytest.mark.parametrize(("query", "first"), [
    ("find symbol for me", "mcp__lsp__find_symbol"),
    ("please run find_symbol on Parser", "mcp__lsp__find_symbol"),
    ("call mcp__lsp__find_symbol with Parser", "mcp__lsp__find_symbol"),
    ("use FindSymbol to find the symbol", "mcp__lsp__find_symbol"),
    ("web fetch https://example.com", "WebFetch"),
    ("webfetch the page", "WebFetch"),
    ("tracker create issue crash", "mcp__tracker__create_issue"),
    ("could you please use find_symbol to look up the Parser class", "mcp__lsp__find_symbol"),
])
def test_the_named_tool_ranks_first_in_every_backend(backend, catalog, query, first):
    result = backend.search(query, catalog)
    assert result.matches[0] == first, (backend.name, result.matches)
    top = result.scored[0]
    mention = [c for c in top.breakdown if c.rule == MENTION_RULE]
    assert len(mention) == 1 and top.score == pytest.approx(sum(c.points for c in top.breakdown), abs=1e-3)
    assert all(s.score < top.score for s in result.scored[1:])


def test_both_tools_of_one_name_come_first_the_one_with_its_server_named_ahead(backend, catalog):
    assert set(backend.search("create issue about the crash", catalog).matches[:2]) == {
        "mcp__tracker__create_issue", "mcp__other__create_issue"}
    assert set(backend.search("create_issue about the crash", catalog).matches[:2]) == {
        "mcp__tracker__create_issue", "mcp__other__create_issue"}
    assert backend.search("other create issue", catalog).matches[0] == "mcp__other__create_issue"


def test_in_a_sentence_only_an_identifier_names_a_tool(catalog):
    # Plain words that spell a name are ordinary words in a sentence ("create an issue" is a
    # request, not the tool create_issue); an identifier-shaped token is a deliberate mention.
    index = mention_index(catalog)
    assert mention_index(catalog) is index  # built once per catalog, kept with it
    sentence = "I would like to find symbol definitions in the code of this project"
    assert [m.name for m in index.mentions(sentence)] == ["mcp__lsp__find_symbol"]
    assert index.mentions(sentence, spaced=False) == []
    assert all(c.rule != MENTION_RULE for s in get_backend("bm25").search(sentence, catalog).scored for c in s.breakdown)
    assert get_backend("bm25").search(sentence.replace("find symbol", "Find_Symbol"), catalog).matches[0] == "mcp__lsp__find_symbol"


def test_a_one_word_name_is_an_ordinary_word(catalog):
    # "weather" names the tool Weather only as a word: no mention, the backend's ranking stands.
    assert mention_index(catalog).mentions("weather this week") == []
    assert all(c.rule != MENTION_RULE for s in get_backend("bm25").search("weather this week", catalog).scored for c in s.breakdown)


def test_required_terms_still_filter_a_named_tool(catalog):
    result = get_backend("bm25").search("find_symbol +grep", catalog, max_results=10)
    assert "mcp__lsp__find_symbol" not in result.matches and result.matches[0] == "mcp__code__grep_symbols"


def test_a_tool_that_is_not_deferred_is_never_promoted():
    catalog = ToolCatalog([Tool(name="FindSymbol", description="Always loaded."),
                           mcp("code", "search_code", "Find a symbol in code.")])
    assert mention_index(catalog).mentions("find symbol") == []
    assert get_backend("bm25").search("find symbol", catalog).matches == ["mcp__code__search_code"]
