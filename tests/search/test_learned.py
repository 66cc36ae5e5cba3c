"""The learned ranking on a small synthetic catalog: it lifts a request like those it was trained on,
never moves a request that names a tool, switches itself off when it cannot win, and round-trips."""
from __future__ import annotations

import pytest

from playground.engine.catalog_io import LabelledQuery
from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.learned import LEARNED_RULE, LearnedBackend, LearnedRanking, train_ranking
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp
from tests.search.fake_encoder import FakeEncoder

MONTHS = ["january", "february", "april", "may", "june", "july", "august", "september", "october", "november",
          "december", "spring", "summer", "autumn", "winter", "quarter", "half", "year"]
GOLD = "mcp__books__reconcile_accounts"


@pytest.fixture
def catalog() -> ToolCatalog:
    return ToolCatalog([
        mcp("books", "list_accounts", "List the accounts of the company and close nothing."),
        mcp("books", "export_report", "Export a report of the company accounts for the month."),
        mcp("books", "reconcile_accounts", "Reconcile bank statements."),
        mcp("books", "create_invoice", "Create an invoice for a customer."),
        mcp("weather", "get_forecast", "Weather forecast for a city."),
        mcp("mail", "send_email", "Send an email message."),
    ])


@pytest.fixture
def backend() -> HybridBackend:
    encoder = FakeEncoder()
    return HybridBackend(semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=MemoryVectorStore())})


def team_examples() -> list[LabelledQuery]:
    """The team's jargon: "close the month for the company accounts" means reconciling them."""
    return [LabelledQuery(id=f"t{i}", query=f"close the month for the company accounts in {month}", expected_tool_names=(GOLD,))
            for i, month in enumerate(MONTHS)]


def test_it_lifts_a_request_like_those_it_learned_and_leaves_a_named_tool_alone(backend, catalog):
    request = "close the month for the company accounts in march"  # not one it was trained on
    before = backend.search(request, catalog, max_results=5).matches
    assert before[0] != GOLD and GOLD in before  # the base ranking has it, lower down

    ranking = train_ranking(backend, catalog, team_examples())
    assert ranking.enabled, ranking.reason
    cv = ranking.cross_validation
    assert cv.learned["top@1"] > cv.base["top@1"]
    learned = LearnedBackend(backend, ranking)
    result = learned.search(request, catalog, max_results=5)
    assert result.matches[0] == GOLD
    top = result.scored[0]
    assert any(part.rule == LEARNED_RULE for part in top.breakdown)
    assert sum(part.points for part in top.breakdown) == pytest.approx(top.score)  # the explanation still adds up

    named = "export_report: close the month for the company accounts in march"
    assert learned.search(named, catalog, max_results=5).matches == backend.search(named, catalog, max_results=5).matches
    assert learned.search(named, catalog, max_results=5).matches[0] == "mcp__books__export_report"
    # The special forms are the base backend's answer, unchanged.
    assert learned.search("select:mcp__mail__send_email", catalog).matches == ["mcp__mail__send_email"]


def test_the_trained_ranking_round_trips_through_its_artefact(backend, catalog):
    ranking = train_ranking(backend, catalog, team_examples())
    again = LearnedRanking.from_bytes(ranking.to_bytes())
    assert again.enabled and again.examples == ranking.examples
    request = "close the month for the company accounts in march"
    assert LearnedBackend(backend, again).search(request, catalog).matches == LearnedBackend(backend, ranking).search(request, catalog).matches


def test_too_few_examples_train_a_ranking_that_stays_off(backend, catalog):
    ranking = train_ranking(backend, catalog, team_examples()[:3])
    assert not ranking.enabled and "at least" in ranking.reason
    request = "close the month for the company accounts in march"
    # Off, it re-ranks nothing: what is left is its examples as the BM25 side's usage log.
    assert LearnedBackend(backend, ranking).search(request, catalog).matches == \
        backend.search(request, catalog, usage=ranking.usage).matches
