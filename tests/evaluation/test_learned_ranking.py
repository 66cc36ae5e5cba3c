"""A profile's learned ranking: trained by its Celery task from the page, measured on the team's and
the shared test splits, shown, and switched on only through the gate."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.engine.search.embedding_cache import EmbeddingCache, MemoryVectorStore
from playground.engine.search.hybrid import HybridBackend
from playground.engine.search.learned import LearnedBackend
from playground.evaluation import learning, tasks
from playground.registry import backends, labelled_sets, learned_rankings
from playground.registry.models import AgentProfile, LearnedRanking
from tests.registry.conftest import make_tool
from tests.search.fake_encoder import FakeEncoder

pytestmark = pytest.mark.django_db

GOLD = "mcp__books__reconcile_accounts"
WORDS = ["january", "february", "april", "june", "july", "august", "september", "october", "november", "december",
         "spring", "summer", "autumn", "winter", "quarter", "half", "year", "branch", "office", "team"]
FIGURES = {"top@1": 0.5, "mrr": 0.6, "recall@5": 0.7, "recall@10": 0.8}


@pytest.fixture
def team(monkeypatch, toy_toolsets):
    """A profile whose team says "close the month" for reconciling accounts, and a hybrid backend on the fake encoder."""
    encoder = FakeEncoder()
    hybrid = HybridBackend(semantic={"encoder": encoder, "cache": EmbeddingCache(None, encoder.dim, store=MemoryVectorStore())})
    monkeypatch.setattr(backends, "search_backend", lambda name=None: hybrid)
    monkeypatch.setattr(learning, "shared_toolsets", lambda: ["toy"])  # the demo set too would only slow the test
    monkeypatch.setattr(tasks.train_learned_ranking, "delay", lambda pk: tasks.train_learned_ranking.apply(args=(pk,)))
    make_tool("mcp__books__list_accounts", "List the accounts of the company and close nothing.")
    make_tool("mcp__books__export_report", "Export a report of the company accounts for the month.")
    make_tool(GOLD, "Reconcile bank statements.")
    make_tool("mcp__mail__send_email", "Send an email message.")
    profile = AgentProfile.objects.create(name="team", tool_search_mode="true")
    searchable = labelled_sets.searchable_names(profile)  # read once, not per row
    for first in WORDS:
        for second in ("north", "south"):
            labelled_sets.add_labelled_query(profile, f"close the month for the company accounts in {first} {second}", GOLD,
                                             searchable=searchable)
    learned_rankings.reset_caches()
    return profile, hybrid


def test_training_from_the_page_runs_the_task_and_shows_before_and_after(admin_client, team, django_capture_on_commit_callbacks):
    profile, hybrid = team
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("evaluation:learned"), {"action": "train", "profile": profile.pk})
    assert response.status_code == 302
    row = LearnedRanking.objects.get()
    assert row.status == "ready", row.error
    assert row.version == 1 and not row.enabled and row.encoder_id == "fake-encoder"
    team_figures = row.metrics["team"]
    counts = labelled_sets.split_counts(profile)
    assert team_figures["train"] == counts["dev"] and team_figures["test"] == counts["test"]
    assert team_figures["after"]["top@1"] > team_figures["before"]["top@1"]  # it learned the team's words
    assert [s["toolset"] for s in row.metrics["shared"]] == ["toy"] and row.metrics["shared"][0]["queries"] > 0

    page = admin_client.get(reverse("evaluation:learned")).content.decode()
    assert f'data-testid="learned-version-{row.pk}"' in page and 'data-testid="learned-shared-toy"' in page
    before, after = team_figures["before"]["top@1"], team_figures["after"]["top@1"]
    assert f"{before:.3f} → {after:.3f}" in page
    assert 'data-testid="learned-on"' not in page  # off by default

    # It wins on the team's split and changes nothing on the shared one: the gate lets it on, and the
    # profile's searches then use it.
    assert row.metrics["shared"][0]["after"] == row.metrics["shared"][0]["before"]
    assert learning.refusals(row.metrics) == []
    catalog = labelled_sets.searchable_catalog(profile)
    request = "close the month for the company accounts in march east"
    assert hybrid.search(request, catalog).matches[0] != GOLD
    admin_client.post(reverse("evaluation:learned"), {"action": "on", "ranking": row.pk})
    row.refresh_from_db()
    assert row.enabled
    wrapped = learned_rankings.with_learned_ranking(profile.pk, hybrid)
    assert isinstance(wrapped, LearnedBackend) and wrapped.search(request, catalog).matches[0] == GOLD
    assert 'data-testid="learned-on"' in admin_client.get(reverse("evaluation:learned")).content.decode()
    admin_client.post(reverse("evaluation:learned"), {"action": "off", "ranking": row.pk})
    assert learned_rankings.with_learned_ranking(profile.pk, hybrid) is hybrid


def ready_row(profile, version, *, team_after=None, shared_after=None, learner_on=True) -> LearnedRanking:
    return LearnedRanking.objects.create(profile=profile, version=version, status="ready", metrics={
        "learner_on": learner_on, "reason": "",
        "team": {"train": 12, "test": 20, "before": FIGURES, "after": team_after or {**FIGURES, "recall@5": 0.75}},
        "shared": [{"toolset": "toy", "queries": 8, "before": FIGURES, "after": shared_after or FIGURES}]})


def test_the_gate_refuses_a_version_that_loses_and_says_why(admin_client, team):
    profile, _ = team
    loses_shared = ready_row(profile, 1, shared_after={**FIGURES, "top@1": 0.45})
    with pytest.raises(learning.SwitchRefused, match=r"loses on the shared toolset toy: top@1 0.500 → 0.450"):
        learning.switch_on(loses_shared)
    loses_team = ready_row(profile, 2, team_after={**FIGURES, "recall@5": 0.75, "mrr": 0.55})
    with pytest.raises(learning.SwitchRefused, match=r"loses on the team's test split: mrr 0.600 → 0.550"):
        learning.switch_on(loses_team)
    no_gain = ready_row(profile, 3, team_after=FIGURES)
    with pytest.raises(learning.SwitchRefused, match="does not win on the team's test split"):
        learning.switch_on(no_gain)
    learner_off = ready_row(profile, 4, learner_on=False)
    with pytest.raises(learning.SwitchRefused, match="switched itself off"):
        learning.switch_on(learner_off)

    response = admin_client.post(reverse("evaluation:learned"), {"action": "on", "ranking": loses_shared.pk}, follow=True)
    assert "stays off" in response.content.decode() and "shared toolset toy" in response.content.decode()
    assert not LearnedRanking.objects.filter(enabled=True).exists()

    wins = ready_row(profile, 5)
    other = ready_row(profile, 6)
    learning.switch_on(wins)
    learning.switch_on(other)  # one version of a profile is on at a time
    assert list(LearnedRanking.objects.filter(enabled=True)) == [other]


def test_viewers_see_the_page_but_cannot_train(viewer_client, team):
    profile, _ = team
    page = viewer_client.get(reverse("evaluation:learned")).content.decode()
    assert f'data-testid="learned-profile-{profile.pk}"' in page and "Train a new version" not in page
    response = viewer_client.post(reverse("evaluation:learned"), {"action": "train", "profile": profile.pk})
    assert response.status_code == 403 and not LearnedRanking.objects.exists()


def test_a_bad_id_is_a_404_not_a_500(admin_client, team):
    assert admin_client.post(reverse("evaluation:learned"), {"action": "on", "ranking": "x"}).status_code == 404
    assert admin_client.post(reverse("evaluation:learned"), {"action": "train", "profile": "999"}).status_code == 404
