from __future__ import annotations

import json

import pytest

from tests.cli_runner import run_cli
from tests.search.test_quality import toy_toolsets  # noqa: F401  (fixture)


def test_eval_json_has_one_row_per_backend_and_style(toy_toolsets):  # noqa: F811
    done = run_cli("eval", "--toolsets", "toy", "--backends", "claude-code,bm25", "--style", "both", "--split", "all",
                   "--json", "--toolsets-dir", str(toy_toolsets))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["split"] == "all" and report["toolsets"] == ["toy"] and report["styles"] == ["natural", "keyword"]
    rows = report["results"]
    assert [(r["backend"], r["style"]) for r in rows] == [
        ("claude-code", "natural"), ("claude-code", "keyword"), ("bm25", "natural"), ("bm25", "keyword")
    ]
    for row in rows:
        assert set(row) == {"toolset", "backend", "style", "split", "queries", "tools", "metrics", "p50_ms", "p95_ms", "build_s", "index_mb", "notes"}
        assert {"recall@1", "recall@3", "recall@5", "recall@10", "complete@5", "complete@10", "mrr"} <= set(row["metrics"])
        assert row["queries"] == 12 and row["tools"] == 3
    assert rows[2]["metrics"]["recall@5"] == 1.0
    assert report["default_gaps"] == []  # the default (hybrid) is not in this run


def test_eval_table_and_bad_input(toy_toolsets):  # noqa: F811
    done = run_cli("eval", "--toolsets", "toy", "--backends", "bm25", "--split", "all", "--toolsets-dir", str(toy_toolsets))
    assert done.returncode == 0, done.stderr
    assert "| toy | natural | bm25 | 12 | 1.000 |" in done.stdout
    # beside recall: no labelled query answered with nothing, every nonsense query with "no match"
    assert "| toy | natural | bm25 | 0 of 12 | 19 of 19 |" in done.stdout
    assert "The default backend (hybrid) is not in this run: no comparison with it." in done.stdout
    missing = run_cli("eval", "--toolsets", "nope", "--backends", "bm25", "--toolsets-dir", str(toy_toolsets))
    assert missing.returncode == 2 and "not found" in missing.stderr
    assert run_cli("eval").returncode == 2


@pytest.mark.parametrize("style", ["natural", "keyword"])
def test_eval_single_catalog_accepts_the_style(toy_toolsets, style):  # noqa: F811
    folder = toy_toolsets / "toy"
    done = run_cli("eval", "--catalog", str(folder / "catalog.jsonl"), "--queries", str(folder / "queries.jsonl"),
                   "--backend", "bm25", "--style", style, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recall_at_k"] == 1.0


def test_eval_runs_one_backend_with_two_settings_side_by_side(toy_toolsets):  # noqa: F811
    done = run_cli("eval", "--toolsets", "toy", "--backends", "bm25,bm25:server_weight=0:k1=1.5", "--split", "all",
                   "--json", "--toolsets-dir", str(toy_toolsets))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["results"]
    assert [r["backend"] for r in rows] == ["bm25", "bm25:server_weight=0:k1=1.5"]
    typo = run_cli("eval", "--toolsets", "toy", "--backends", "bm25:k=1.5", "--toolsets-dir", str(toy_toolsets))
    assert typo.returncode == 2 and "unknown option(s) k for backend 'bm25'" in typo.stderr
    not_a_pair = run_cli("eval", "--toolsets", "toy", "--backends", "bm25:k1", "--toolsets-dir", str(toy_toolsets))
    assert not_a_pair.returncode == 2 and "not key=value" in not_a_pair.stderr


def test_backend_specs_read_json_values_and_name_the_instance():
    from playground.engine.search.backends import backend_from_spec, parse_backend_spec

    assert parse_backend_spec("hybrid") == ("hybrid", {})
    assert parse_backend_spec("hybrid:aspect_weight=0:intent_weight=0.5") == ("hybrid", {"aspect_weight": 0, "intent_weight": 0.5})
    backend = backend_from_spec("bm25:field_weights={\"schema\":0}")
    assert backend.name == 'bm25:field_weights={"schema":0}' and backend.field_weights["schema"] == 0
    assert backend_from_spec("bm25").name == "bm25"


def test_backend_lists_split_on_commas_outside_json_values():
    from playground.toolsearch.cli import split_specs

    assert split_specs("bm25, hybrid:bm25={\"scoring\":\"bm25f\",\"k1\":1.5},bm25:field_weights={\"name\":2,\"schema\":0.3}") == [
        "bm25", "hybrid:bm25={\"scoring\":\"bm25f\",\"k1\":1.5}", "bm25:field_weights={\"name\":2,\"schema\":0.3}",
    ]
    assert split_specs("") == [] and split_specs("a,,b") == ["a", "b"]


def test_eval_learn_from_dev_reports_before_and_after_per_toolset(toy_toolsets):  # noqa: F811
    done = run_cli("eval", "--learn-from", "dev", "--toolsets", "toy", "--json", "--toolsets-dir", str(toy_toolsets))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["learn_from"] == "dev" and report["split"] == "test"
    (row,) = report["results"]
    assert row["toolset"] == "toy" and row["test_queries"] + row["train_queries"] == 12
    for figures in (row["before"], row["usage_only"], row["after"]):
        assert set(figures) == {"top@1", "mrr", "recall@5", "recall@10"}
    # Four dev requests are too few to learn from: the learner stays off and says so; after = the usage log's figures.
    assert row["enabled"] is False and "at least" in row["reason"] and row["after"] == row["usage_only"]
    assert row["delta"]["recall@5"] == round(row["after"]["recall@5"] - row["before"]["recall@5"], 4)

    no_dense = run_cli("eval", "--learn-from", "dev", "--toolsets", "toy", "--backend", "bm25", "--toolsets-dir", str(toy_toolsets))
    assert no_dense.returncode == 2 and "no dense side" in no_dense.stderr
    both = run_cli("eval", "--learn-from", "dev", "--toolsets", "toy", "--style", "both", "--toolsets-dir", str(toy_toolsets))
    assert both.returncode == 2 and "one query style" in both.stderr
