"""`python -m playground.agenteval`: the exact JSON shape on a scripted run (in this process), its errors,
and the demo agent end to end on a stack of its own (a child process, as a person runs it)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from playground.agenteval.cli import PAIR_KEYS, PROFILE_KEYS, main
from tests.agenteval.conftest import ISSUE, SLACK, TIME, WEATHER

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    {"id": "t0", "query": "What time is it in Tokyo?", "expected_tool_names": [TIME]},
    {"id": "t1", "query": "Post 'hi' to the #general Slack channel", "expected_tool_names": [SLACK]},
    {"id": "t2", "query": "Open a GitHub issue titled 'Login broken'", "expected_tool_names": [ISSUE]},
    {"id": "t3", "query": "Weather forecast for Paris", "expected_tool_names": [WEATHER]},
]


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_json_has_exactly_the_documented_shape_and_the_scripted_answer(tmp_path, tool_world, claude_profiles, scripted_api,
                                                                      eager_celery):
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in QUERIES) + "\n")
    code, out, err = run_main("--tasks", str(path), "--profiles", "on,off", "--json")
    assert code == 0, err
    report = json.loads(out)  # stdout holds the JSON and nothing else
    assert list(report) == ["tasks", "profiles", "pairs"] and report["tasks"] == 4
    assert [list(row) for row in report["profiles"]] == [list(PROFILE_KEYS)] * 2
    assert [list(pair) for pair in report["pairs"]] == [list(PAIR_KEYS)]
    on, off = report["profiles"]
    assert (on["profile"], on["provider"], on["completed"], on["success"], off["success"]) == ("on", "anthropic", 4, 0.75, 0.5)
    assert on["first_call_success"] == 0.75 and off["first_call_success"] == 0.25
    assert on["searches_per_task"] == 0.75 and off["turns_per_task"] == 2.25
    assert on["cost_usd_per_task"] == pytest.approx(2.75 * 0.00375)
    assert report["pairs"] == [{"a": "on", "b": "off", "success_diff": 0.25, "p_value": 1.0}]
    assert "task run" in err and "8/8 finished" in err

    # The same file again is the same task set (not a second copy); a table without --json.
    code, out, _ = run_main("--tasks", str(path), "--profiles", "off", "--limit", "2")
    assert code == 0 and out.splitlines()[0].startswith("profile") and "off" in out


@pytest.mark.django_db
@pytest.mark.parametrize("argv, message", [
    (["--tasks", "no-such-toolset", "--profiles", "on"], "No toolset named 'no-such-toolset'"),
    (["--tasks", "QUERIES", "--profiles", "on,nobody"], "No profile named 'nobody'"),
    # every-mode is one profile per loading mode (here "on" and "off"), not a profile's name
    (["--tasks", "QUERIES", "--profiles", "every-mode,nobody"], "No profile named 'nobody' (profiles: off, on)"),
    (["--tasks", "QUERIES", "--profiles", "on", "--catalog", "nowhere"], "No toolset catalog named 'nowhere'"),
])
def test_bad_input_is_a_clear_error(tmp_path, tool_world, claude_profiles, argv, message):
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps(QUERIES[0]) + "\n")
    code, out, err = run_main(*[str(path) if a == "QUERIES" else a for a in argv])
    assert code == 2 and out == "" and message in err and "Traceback" not in err


@pytest.mark.django_db
def test_tasks_whose_tools_the_registry_lacks_are_refused(tmp_path, tool_world, claude_profiles):
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"id": "x", "query": "q", "expected_tool_names": ["mcp__absent__tool"]}) + "\n")
    code, _, err = run_main("--tasks", str(path), "--profiles", "on")
    assert code == 2 and "lacks 1 gold tool" in err and "wrong catalog" in err


@pytest.mark.slow
def test_the_demo_agent_end_to_end_on_its_own_stack():
    """A fresh stack (database, Redis prefix and queue, worker, demo data): the shipped demo catalog's
    tasks under tool search off and on, with the demo agent."""
    command = [sys.executable, "-m", "playground.agenteval", "--tasks", "mcp-combined", "--profiles",
               "Tool search off,Tool search on (native)", "--limit", "3", "--own-stack", "--workers", "1", "--json"]
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        command += ["--database-url", database_url]
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-6000:]
    report = json.loads(completed.stdout)
    assert report["tasks"] == 3 and len(report["profiles"]) == 2
    off, on = report["profiles"]
    assert off["provider"] == on["provider"] == "demo"
    assert off["completed"] == on["completed"] == 3
    assert off["searches_per_task"] == 0 and on["searches_per_task"] > 0
    assert on["input_tokens_per_task"] < off["input_tokens_per_task"] / 5  # 706 deferred tools are not sent
    assert "stack stopped" in completed.stderr
