"""The command line: `main(argv)` in this process (tests/cli_runner.py), and once as users run it,
`python -m playground.toolsearch` in a subprocess."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from playground.engine.catalog_io import dump_tools
from tests.cli_runner import run_cli

from .conftest import REPO_ROOT, mcp


def test_the_module_runs_as_users_run_it(catalog_file):
    done = subprocess.run([sys.executable, "-m", "playground.toolsearch", "search", "--catalog", str(catalog_file),
                           "select:mcp__slack__post_message"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "mcp__slack__post_message" in done.stdout


@pytest.fixture
def catalog_file(tmp_path):
    path = tmp_path / "catalog.jsonl"
    path.write_text(
        dump_tools(
            [
                mcp("slack", "post_message", "Send a message to a Slack channel."),
                mcp("slack", "list_channels", "List channels."),
                mcp("github", "create_issue", "Create an issue."),
            ]
        )
    )
    return path


def test_search_prints_the_ranking_with_the_breakdown(catalog_file):
    done = run_cli("search", "--catalog", catalog_file, "+slack send", "--backend", "claude-code")
    assert done.returncode == 0, done.stderr
    assert "1. mcp__slack__post_message  score 16" in done.stdout
    assert "'slack' exact name part [name: slack]" in done.stdout
    assert "required: slack; optional: send" in done.stdout


def test_search_json_has_matches_and_results(catalog_file):
    done = run_cli("search", "--catalog", catalog_file, "slack", "--json", "--max-results", "1", "--backend", "claude-code")
    output = json.loads(done.stdout)
    assert output["matches"] == ["mcp__slack__post_message"]
    [result] = output["results"]
    assert set(result) == {"name", "score", "breakdown"} and result["score"] == 14
    assert result["breakdown"][0] == {"term": "slack", "rule": "exact name part", "points": 12, "field": "name", "detail": "slack"}


def test_search_reads_an_mcp_tools_list_result(tmp_path):
    path = tmp_path / "time.json"
    path.write_text(json.dumps({"tools": [{"name": "get_current_time", "description": "Current time", "inputSchema": {"type": "object"}}]}))
    done = run_cli("search", "--catalog", path, "time", "--json")
    assert json.loads(done.stdout)["matches"] == ["mcp__time__get_current_time"]


def test_a_malformed_catalog_exits_2_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"name": "ok"}\n{"name": "ok2"}\n{"name": \n')
    done = run_cli("search", "--catalog", path, "x")
    assert done.returncode == 2
    assert f"{path}, line 3: invalid JSON" in done.stderr
    assert done.stdout == ""


def test_an_unknown_backend_exits_2(catalog_file):
    done = run_cli("search", "--catalog", catalog_file, "x", "--backend", "nope")
    assert done.returncode == 2 and "unknown search backend 'nope'" in done.stderr


def test_malformed_queries_exit_2_naming_the_line(tmp_path, catalog_file):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "1", "query": "x", "expected_tool_names": ["mcp__slack__list_channels"]}) + "\n[1]\n")
    done = run_cli("eval", "--catalog", catalog_file, "--queries", queries, "--backend", "claude-code")
    assert done.returncode == 2 and "line 2: expected a query object" in done.stderr


def test_eval_json_has_the_metrics_and_the_ranked_names_per_query(tmp_path, catalog_file):
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"id": "a", "query": "slack message", "expected_tool_names": ["mcp__slack__post_message"]})
        + "\n"
        + json.dumps({"id": "b", "query": "open an issue", "expected_tool_names": ["mcp__github__create_issue", "mcp__slack__list_channels"]})
        + "\n"
    )
    done = run_cli("eval", "--catalog", catalog_file, "--queries", queries, "--backend", "claude-code", "--k", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["recall_at_k"] == pytest.approx((1 + 0.5) / 2)
    assert report["full_hit_at_k"] == 0.5 and report["mrr"] == 1.0
    assert report["top_1"] == 1.0  # both queries' first result is gold; recall@1 is lower for the two-gold one
    assert {"recall_at_10", "p50_ms", "p95_ms"} <= set(report)
    assert report["queries"][0] == {"id": "a", "ranked": ["mcp__slack__post_message", "mcp__slack__list_channels"]}


def test_eval_on_mcp_combined_prints_its_figures(shared_toolsets):
    folder = shared_toolsets / "mcp-combined"
    done = run_cli("eval", "--catalog", folder / "catalog.jsonl", "--queries", folder / "queries.jsonl", "--backend", "claude-code", "--k", "5")
    assert done.returncode == 0, done.stderr
    assert "over 706 tools, 90 queries" in done.stdout
    assert "recall@5" in done.stdout and "MRR@10" in done.stdout and "top-1" in done.stdout


def test_bench_json_rows_compare_both_backends_and_rankings_match(shared_toolsets):
    done = run_cli("bench", "--json", "--details", "--sizes", "300", "--queries", "4", "--repeat", "1", "--no-memory", "--search-backends", "bm25", env={"TOOLSETS_DIR": str(shared_toolsets)})
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {(r["style"], r["backend"]) for r in rows} == {(s, b) for s in ("keyword", "natural") for b in ("claude-code", "naive", "bm25")}
    assert all(r["tools"] == 300 and r["p50_ms"] > 0 for r in rows)
    assert all(r["identical"] for r in rows if r["backend"] == "naive")


def test_bench_times_learning_from_usage_when_asked(shared_toolsets):
    done = run_cli("bench", "--json", "--sizes", "300", "--queries", "4", "--repeat", "1", "--no-memory", "--search-backends", "bm25",
                   "--usage-entries", "50", env={"TOOLSETS_DIR": str(shared_toolsets)})
    assert done.returncode == 0, done.stderr
    learned = [r for r in json.loads(done.stdout) if r["backend"] == "bm25 +usage"]
    assert [r["style"] for r in learned] == ["keyword", "natural"] and all(r["p50_ms"] > 0 and r["build_s"] >= 0 for r in learned)
    assert run_cli("bench", "--usage-entries", "-1").returncode == 2


def test_bench_plain_json_rows_have_exactly_the_documented_keys(shared_toolsets):
    done = run_cli("bench", "--json", "--sizes", "200", "--queries", "2", "--repeat", "1", "--no-memory", "--search-backends", "bm25", env={"TOOLSETS_DIR": str(shared_toolsets)})
    assert done.returncode == 0, done.stderr
    for row in json.loads(done.stdout):
        assert set(row) == {"tools", "style", "backend", "p50_ms", "p95_ms", "build_s"}


def test_bench_prints_each_encoders_document_rate(shared_toolsets):
    from playground.engine.search.encoder import MODEL_ID, EncoderUnavailable, find_model_dir, resolve_runtime
    from tests.conftest import IN_CI

    try:
        find_model_dir()
        default_runtime = resolve_runtime(None)
    except EncoderUnavailable as exc:
        if IN_CI:
            pytest.fail(f"the semantic extra is required under CI=true: {exc}")
        pytest.skip(str(exc))
    done = run_cli("bench", "--sizes", "200", "--queries", "2", "--repeat", "1", "--no-memory", "--search-backends",
                   'bm25,hybrid,semantic:runtime="onnx"', env={"TOOLSETS_DIR": str(shared_toolsets)})
    assert done.returncode == 0, done.stderr
    rates = re.findall(r"^encoder (\S+) on (\S+): (\d+) tool documents/s", done.stdout, re.M)
    # one line per distinct encoder (bm25 has none), each a measured rate
    assert [runtime for _, runtime, _ in rates] == [default_runtime, "onnx"]
    assert all(model.startswith(MODEL_ID) and int(rate) > 0 for model, _, rate in rates)


def test_bench_without_toolsets_exits_2(tmp_path):
    done = run_cli("bench", "--sizes", "10", env={"TOOLSETS_DIR": str(tmp_path / "none")})
    assert done.returncode == 2 and "not found" in done.stderr


def test_bad_arguments_exit_2():
    assert run_cli("search", "--catalog", "x", "q", "--max-results", "0").returncode == 2
    assert run_cli("bench", "--sizes", "a,b").returncode == 2


def announce_json(capsys, *args):
    from playground.toolsearch.cli import main

    assert main(["announce", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_announce_prints_exactly_the_documented_figures(capsys, catalog_file):
    figures = announce_json(capsys, "--catalog", catalog_file, "--style", "grouped")
    assert list(figures) == ["style", "tools", "announcement_tokens", "first_turn_tool_tokens", "all_tools_tokens", "saved_share",
                             "fits_window", "cache"]
    assert (figures["style"], figures["tools"], figures["fits_window"]) == ("grouped", 3, True)
    from playground.engine.announcements import announce, estimate_tokens
    from playground.engine.catalog_io import load_catalog

    names = [t.name for t in load_catalog(catalog_file)]
    assert figures["announcement_tokens"] == estimate_tokens(announce(names, [], "full", layout="grouped").text)
    assert figures["saved_share"] == round(1 - figures["first_turn_tool_tokens"] / figures["all_tools_tokens"], 4)


def test_announce_prices_the_cached_request_and_its_all_tools_baseline_beside_the_raw_share(capsys, tmp_path):
    """The raw token share stays; beside it the first turn and the steady state, cached, from the cache
    model and the price table, for the request and for every tool in full."""
    from playground.engine.pricing import PriceTable

    path = tmp_path / "many.jsonl"
    path.write_text(dump_tools([mcp(f"server{i % 9}", f"tool_number_{i}", "does a thing with many words " * 4)
                                for i in range(300)]))
    figures = announce_json(capsys, "--catalog", path, "--style", "grouped")
    cache = figures["cache"]
    assert (cache["model"], cache["ttl"], cache["enabled"]) == ("claude-sonnet-4-5", "5m", True)
    for row in (cache["request"], cache["all_tools"]):
        first, steady = row["first"], row["steady"]
        assert steady["cache_read_tokens"] == first["cache_write_tokens"] > 0  # written once, then read
        assert steady["cost_usd"] == PriceTable().cost_usd("claude-sonnet-4-5", steady["uncached_tokens"], 0, 0,
                                                           steady["cache_read_tokens"])
    assert cache["all_tools"]["steady"]["cost_usd"] > cache["request"]["steady"]["cost_usd"]
    assert cache["all_tools"]["first"]["input_tokens"] > cache["request"]["first"]["input_tokens"]
    assert 0 < figures["saved_share"] < 1  # the raw figure, unchanged beside the priced ones


def test_announce_reports_a_refused_flat_list_and_still_exits_0(capsys, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(dump_tools([mcp(f"server{i % 9}", f"tool_number_{i}") for i in range(800)]))
    flat = announce_json(capsys, "--catalog", path, "--style", "flat", "--context-window", "10000")
    budgeted = announce_json(capsys, "--catalog", path, "--style", "budgeted", "--context-window", "10000")
    assert flat["fits_window"] is False and flat["announcement_tokens"] > 5000
    assert budgeted["fits_window"] is True and budgeted["announcement_tokens"] <= 200  # 2 % of 10,000


def test_announce_without_a_catalog_or_sizes_is_bad_input(capsys):
    from playground.toolsearch.cli import main

    assert main(["announce"]) == 2
    assert "--catalog" in capsys.readouterr().err
