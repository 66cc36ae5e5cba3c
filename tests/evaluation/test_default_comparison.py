"""The run page says plainly where the default backend is not the best (and shows the queries)."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.toolset_fixtures import TOY_TOOLS

from playground.evaluation import tasks
from playground.evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db


# Requests that share no word with their tool: a keyword scorer misses them, a dense one does not.
PARAPHRASES = [
    ("Will it rain in Rome tomorrow, do I need an umbrella?", "mcp__weather__get_forecast"),
    ("Is it going to be sunny and warm at the seaside this weekend?", "mcp__weather__get_forecast"),
    ("Drop Bob a message letting him know I am running late", "mcp__mail__send_email"),
    ("Show me what is written inside notes.txt", "mcp__files__read_file"),
]


@pytest.fixture
def paraphrase_toolset(toy_toolsets):
    folder = toy_toolsets / "paraphrase"
    folder.mkdir()
    (folder / "catalog.jsonl").write_text("\n".join(json.dumps(t) for t in TOY_TOOLS) + "\n")
    queries = [{"id": f"p{i}", "query": text, "expected_tool_names": [gold]} for i, (text, gold) in enumerate(PARAPHRASES)]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    return "paraphrase"


def _run(admin_client, backends, monkeypatch, capture, toolset="toy"):
    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    with capture(execute=True):
        admin_client.post(reverse("evaluation:index"), {"toolset": toolset, "backends": backends, "query_style": "natural",
                                                        "split": "all", "query_limit": ""})
    run = EvaluationRun.objects.latest("pk")
    assert run.status == "done", run.error
    return run, admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()


def test_a_backend_ahead_of_the_default_is_named_with_the_queries_it_wins(admin_client, paraphrase_toolset, settings, monkeypatch,
                                                                           django_capture_on_commit_callbacks):
    settings.TOOLSEARCH_DEFAULT_BACKEND = "claude-code"
    run, page = _run(admin_client, ["claude-code", "semantic"], monkeypatch, django_capture_on_commit_callbacks, paraphrase_toolset)
    recall = {row["backend"]: row["metrics"]["recall@5"] for row in run.results["rows"]}
    assert recall["semantic"] > recall["claude-code"]
    [gap] = run.results["gaps"]
    assert (gap["default"], gap["leader"]) == ("claude-code", "semantic") and gap["better"] > 0
    assert "Where the default (claude-code) is not the best" in page
    assert f"semantic {recall['semantic']:.3f} against the default claude-code {recall['claude-code']:.3f}" in page
    assert f"more gold tools on {gap['better']} of 4 queries" in page
    assert gap["examples"] and gap["examples"][0]["query"][:40] in page
    index = admin_client.get(reverse("evaluation:index")).content.decode()  # the latest run on the index says it too
    assert "Where the default (claude-code) is not the best" in index


def test_the_page_says_when_the_default_leads_or_is_absent(admin_client, toy_toolsets, settings, monkeypatch,
                                                           django_capture_on_commit_callbacks):
    settings.TOOLSEARCH_DEFAULT_BACKEND = "bm25"
    run, page = _run(admin_client, ["claude-code", "bm25"], monkeypatch, django_capture_on_commit_callbacks)
    assert run.results["gaps"] == []
    assert "The default backend (bm25) has the best recall@5 of this run." in page
    _, page = _run(admin_client, ["claude-code"], monkeypatch, django_capture_on_commit_callbacks)
    assert "The default backend (bm25) is not in this run" in page


def test_runs_stored_before_the_comparison_show_no_claim(admin_client):
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="done",
                                       results={"rows": [{"backend": "bm25", "metrics": {"recall@5": 1.0}, "queries": 1}]})
    page = admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()
    assert page.count("default-comparison") == 0 and "is not the best" not in page
