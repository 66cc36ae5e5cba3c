from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.search.test_quality import toy_toolsets  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "playground.toolsearch", *args],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})}, timeout=300,
    )


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


def test_eval_table_and_bad_input(toy_toolsets):  # noqa: F811
    done = run_cli("eval", "--toolsets", "toy", "--backends", "bm25", "--split", "all", "--toolsets-dir", str(toy_toolsets))
    assert done.returncode == 0, done.stderr
    assert "| toy | natural | bm25 | 12 | 1.000 |" in done.stdout
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
