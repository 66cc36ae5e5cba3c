from __future__ import annotations

import pytest
from django.urls import reverse

from playground.evaluation import services
from playground.evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db


def test_running_run_polls_and_shows_its_progress(viewer_client):
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="running", progress=0.4, progress_message="toy bm25 natural: 5/12")
    response = viewer_client.get(reverse("evaluation:progress", args=[run.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'hx-trigger="every 1s"' in body and reverse("evaluation:progress", args=[run.pk]) in body
    assert 'aria-valuenow="40"' in body and "toy bm25 natural: 5/12" in body


def test_a_query_limit_reads_as_a_ceiling_not_a_count(viewer_client):
    # A split smaller than the limit runs all its queries; the results table gives the count.
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="running", query_limit=200)
    body = viewer_client.get(reverse("evaluation:progress", args=[run.pk])).content.decode()
    assert "up to 200 queries of the split" in body and "200 sampled queries" not in body


def test_failed_run_shows_the_error_and_stops_polling(viewer_client):
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="failed", error="ValueError: toolset 'toy' not found")
    body = viewer_client.get(reverse("evaluation:progress", args=[run.pk])).content.decode()
    assert "not found" in body and "hx-trigger" not in body


def test_execute_run_saves_progress_while_running(toy_toolsets, monkeypatch):
    monkeypatch.setattr(services, "PROGRESS_SAVE_INTERVAL_S", 0.0)
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25", "claude-code"], query_style="keyword", split="all")
    seen: list[float] = []

    from django.db.models import QuerySet

    real_update = QuerySet.update

    def spy(self, **kwargs):
        if "progress" in kwargs:
            seen.append(kwargs["progress"])
        return real_update(self, **kwargs)

    monkeypatch.setattr(QuerySet, "update", spy)
    services.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "done" and run.query_style == "keyword"
    assert seen and seen == sorted(seen) and 0 < seen[0] < 1
    assert [r["style"] for r in run.results["rows"]] == ["keyword", "keyword"]


def test_execute_run_records_a_failure(toy_toolsets):
    run = EvaluationRun.objects.create(toolset="absent", backends=["bm25"], split="all")
    services.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "absent" in run.error and run.finished_at is not None
    # a redelivered task does not run a finished run again
    assert services.execute_run(run.pk).status == "failed"
