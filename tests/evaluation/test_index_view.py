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
    assert "Only editors can start runs" in body
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
    assert "queued" not in page.lower() and 'data-status="done"' in page  # no stale flash on a finished run
    assert "<svg" in page and "bm25 recall@5 1.000" in page  # the chart's bar titles
    # recall counting same-operation tools of other servers, beside the strict figure (no such tools here: the same)
    assert rows[1]["metrics"]["same_op_recall@5"] == rows[1]["metrics"]["recall@5"]
    assert "recall@5 same-op</th>" in page and '<td class="num same-op">1.000</td>' in page
    # the no-match gate's two rates: no labelled query answered with nothing, every nonsense query "no match"
    assert rows[1]["metrics"]["empty"] == 0.0 and rows[1]["metrics"]["nonsense_no_match"] == 1.0
    assert "answered empty</th>" in page and '<td class="num empty-answers">0 of 12</td>' in page
    assert '<td class="num nonsense">19 of 19</td>' in page
    # top-1 beside recall, in the table and the chart, as the run measured it
    top_1 = rows[1]["metrics"]["top@1"]
    assert 0.0 <= top_1 <= 1.0 and f'<td class="num top-1">{top_1:.3f}</td>' in page
    assert f"bm25 top-1 {top_1:.3f}" in page and "recall@1 " not in page  # the chart draws top-1, not recall@1
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


def test_a_backend_with_settings_runs_beside_the_ticked_ones(admin_client, toy_toolsets, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    fields = {"toolset": "toy", "backends": ["bm25"], "query_style": "natural", "split": "all", "query_limit": ""}
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(reverse("evaluation:index"), {**fields, "variants": "bm25:k1=2.0\n\nbm25: field_weights={\"name\": 0, \"description\": 0}\nbm25:k1=2.0"})
    run = EvaluationRun.objects.get()
    assert run.status == "done", run.error
    assert [r["backend"] for r in run.results["rows"]] == ["bm25", "bm25:k1=2.0", 'bm25:field_weights={"name": 0, "description": 0}']  # a repeat runs once
    # Without name and description matches the toy queries find less: the setting reached the backend.
    recall = {r["backend"]: r["metrics"]["recall@5"] for r in run.results["rows"]}
    assert recall['bm25:field_weights={"name": 0, "description": 0}'] < recall["bm25"]
    page = admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()
    assert "<title>bm25:k1=2.0</title>" in page and ">k1=2.0</tspan>" in page  # the chart's two-line label


@pytest.mark.parametrize(("variants", "message"), [
    ("bm25", "write a backend"),
    ("nonexistent:k1=1", "write a backend"),
    ("bm25:k1=\"abc\"", "could not convert string to float"),
    ("bm25:k2=1", "unknown option &#x27;k2&#x27;"),
    ("postgres:dsn=\"postgres://x@h/db\"", "takes no settings"),
    ("\n".join(f"bm25:k1={k}" for k in range(1, 9)), "At most 6"),
])
def test_a_bad_backend_with_settings_is_a_form_error_not_a_failed_run(admin_client, toy_toolsets, variants, message):
    response = admin_client.post(reverse("evaluation:index"), {"toolset": "toy", "query_style": "natural", "split": "all", "variants": variants})
    assert response.status_code == 200 and message in response.content.decode()
    assert not EvaluationRun.objects.exists()


def test_a_run_needs_a_backend(admin_client, toy_toolsets):
    response = admin_client.post(reverse("evaluation:index"), {"toolset": "toy", "query_style": "natural", "split": "all"})
    assert "Tick a backend or write one with settings." in response.content.decode() and not EvaluationRun.objects.exists()


def test_a_fresh_clone_lists_the_demo_set_and_says_where_more_come_from(admin_client, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path / "absent"))  # no shared toolsets beside the clone
    body = admin_client.get(reverse("evaluation:index")).content.decode()
    assert '<option value="demo" selected>demo</option>' in body
    assert "ships with the project" in body and "TOOLSETS_DIR" in body and "None found" in body
    assert str(tmp_path / "absent") in body  # staff see the folder that was searched


def test_a_viewer_is_told_the_variable_not_the_servers_folder(viewer_client, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path / "absent"))
    body = viewer_client.get(reverse("evaluation:index")).content.decode()
    assert "ships with the project" in body and "TOOLSETS_DIR" in body and str(tmp_path / "absent") not in body


def test_toolsets_dir_adds_its_toolsets_after_the_demo_set(admin_client, toy_toolsets):
    body = admin_client.get(reverse("evaluation:index")).content.decode()
    assert body.index('value="demo"') < body.index('value="toy"')
    assert "Found there: toy." in body


def test_the_demo_set_runs_by_default(admin_client, tmp_path, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path / "absent"))
    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(reverse("evaluation:index"), {"toolset": "demo", "backends": ["bm25"], "query_style": "natural",
                                                       "split": "test", "query_limit": "10"})
    run = EvaluationRun.objects.get()
    assert run.status == "done", run.error
    assert run.results["rows"][0]["toolset"] == "demo" and run.results["rows"][0]["queries"] == 10


def test_a_run_stored_before_top_1_shows_a_dash_not_a_zero(admin_client):
    run = EvaluationRun.objects.create(
        toolset="toy", backends=["bm25"], status="done", progress=1.0,
        results={"rows": [{"backend": "bm25", "queries": 3, "metrics": {"recall@5": 1.0, "recall@10": 1.0, "complete@5": 1.0, "mrr": 1.0},
                           "p50_ms": 1.0, "p95_ms": 1.0, "build_s": 0.1, "index_mb": 0.1}]},
    )
    page = admin_client.get(reverse("evaluation:detail", args=[run.pk])).content.decode()
    assert 'title="stored before top-1 was measured"' in page
    assert "bm25 top-1" not in page and "bm25 recall@5 1.000" in page  # nor a zero bar in the chart


def test_a_profiles_own_labelled_set_runs_like_a_toolset(admin_client, monkeypatch, django_capture_on_commit_callbacks):
    from playground.registry import labelled_sets
    from playground.registry.models import AgentProfile
    from tests.registry.conftest import make_tool

    make_tool("mcp__github__create_issue", "Create a new issue in a GitHub repository")
    make_tool("mcp__weather__get_forecast", "Weather forecast for a city")
    make_tool("mcp__slack__post_message", "Post a message to a Slack channel")
    profile = AgentProfile.objects.create(name="team", tool_search_mode="true", search_backend="bm25")
    labelled = [("open a bug ticket", "mcp__github__create_issue"), ("rain tomorrow in oslo", "mcp__weather__get_forecast"),
                ("tell the team channel", "mcp__slack__post_message")]
    for query, tool in labelled:
        labelled_sets.add_labelled_query(profile, query, tool)
    toolset = labelled_sets.toolset_name(profile)
    form = admin_client.get(reverse("evaluation:index"), {"toolset": toolset}).content.decode()
    assert f'<option value="{toolset}" selected>team: its own labelled set (3 labelled)</option>' in form

    monkeypatch.setattr(tasks.run_evaluation, "delay", lambda pk: tasks.run_evaluation.apply(args=(pk,)))
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(reverse("evaluation:index"), {"toolset": toolset, "backends": ["bm25"], "query_style": "natural",
                                                        "split": "all", "query_limit": ""})
    run = EvaluationRun.objects.get()
    assert run.status == "done", run.error
    row = run.results["rows"][0]
    assert row["toolset"] == toolset and row["queries"] == 3 and row["tools"] == 3
    assert 0.0 <= row["metrics"]["top@1"] <= row["metrics"]["recall@5"] <= 1.0
