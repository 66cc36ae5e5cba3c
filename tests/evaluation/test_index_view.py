from __future__ import annotations

import pytest
from django.urls import reverse

from playground.evaluation import tasks
from playground.evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db


def test_anonymous_is_sent_to_login(client):
    response = client.get(reverse("evaluation:index"))
    assert response.status_code == 302 and "login" in response["Location"]


def test_viewer_sees_runs_but_cannot_start_one(viewer_client, toy_toolsets):
    EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="done", results={"rows": []})
    response = viewer_client.get(reverse("evaluation:index"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Only staff can start runs" in body
    assert "<td>toy</td>" in body
    denied = viewer_client.post(reverse("evaluation:index"), {"toolset": "toy", "backends": ["bm25"], "query_style": "natural", "split": "all"})
    assert denied.status_code == 403
    assert EvaluationRun.objects.count() == 1


def test_staff_starts_a_run_that_the_task_completes(admin_client, toy_toolsets, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    form = admin_client.get(reverse("evaluation:index")).content.decode()
    assert 'value="toy"' in form and 'value="bm25"' in form
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("evaluation:index"),
            {"toolset": "toy", "backends": ["claude-code", "bm25"], "query_style": "natural", "split": "all", "query_limit": ""},
        )
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("evaluation:detail", args=[run.pk])
    assert run.status == "done" and run.progress == 1.0 and run.created_by.username == "alice"
    rows = run.results["rows"]
    assert [r["backend"] for r in rows] == ["claude-code", "bm25"]
    assert rows[1]["metrics"]["recall@5"] == 1.0 and rows[1]["queries"] == 12

    page = admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()
    assert "<svg" in page and "bm25 recall@5 1.000" in page  # the chart's bar titles
    assert "hx-trigger" not in page  # finished: no more polling
    index = admin_client.get(reverse("evaluation:index")).content.decode()
    assert "Latest finished run" in index and "<svg" in index


def test_invalid_form_is_shown_not_queued(admin_client, toy_toolsets):
    response = admin_client.post(reverse("evaluation:index"), {"toolset": "missing", "backends": [], "query_style": "natural", "split": "all"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode() or "This field is required" in response.content.decode()
    assert not EvaluationRun.objects.exists()


def test_a_run_can_learn_from_usage_on_the_test_split_only(admin_client, toy_toolsets, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    fields = {"toolset": "toy", "backends": ["claude-code", "bm25"], "query_style": "natural", "query_limit": "", "usage_from": "dev"}
    refused = admin_client.post(reverse("evaluation:index"), {**fields, "split": "all"})
    assert refused.status_code == 200 and "test split only" in refused.content.decode()
    assert not EvaluationRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(reverse("evaluation:index"), {**fields, "split": "test"})
    run = EvaluationRun.objects.get()
    assert run.usage_from == "dev" and run.status == "done", run.error
    assert [r["backend"] for r in run.results["rows"]] == ["claude-code", "bm25 +usage"]
    page = admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()
    assert "learned from usage (dev split as the log)" in page
