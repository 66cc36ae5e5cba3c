"""The load test (`python -m playground.loadtest`): its stats helpers, and one small level end to end.

The end-to-end test starts the command as a child process, as `make load` does: it brings up its
own stack (daphne and a Celery worker through playground.runner), logs in through the real form,
runs two demo-agent conversations over their sockets and prints `--json`. Its isolation is the
command's own: a database of its own (on the PostgreSQL server of DATABASE_URL under CI, copied from
one prepared once for the module — `stack_database` —, an SQLite file otherwise), its own Channels
prefix and Celery queue on this session's Redis.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from playground.loadtest.cli import cpu_spent, parse_args, parse_levels
from playground.loadtest.stack import EmbeddedStack, StackError, process_tree_cpu_seconds, run_database_url
from playground.loadtest.stats import (
    LEVEL_KEYS, STACK_KEYS, WATCHER_KEYS, ConversationResult, format_table, percentile, read_frame, sequence_check, summarize_level,
    summarize_watchers,
)

from tests.conftest import RUN_ID
from tests.loadtest_template import drop_template

ROOT = Path(__file__).resolve().parents[1]


# -- stats helpers ------------------------------------------------------------------------------------
def test_percentile_interpolates_between_ranks():
    assert percentile([], 50) is None
    assert percentile([7], 99) == 7
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 0, 5], 0) == 0 and percentile([10, 0, 5], 100) == 10
    assert percentile(list(range(101)), 99) == pytest.approx(99)


def test_sequence_check_counts_gaps_and_repeats():
    assert sequence_check([1, 2, 3]) == (0, 0)
    assert sequence_check([1, 3]) == (1, 0)
    assert sequence_check([1, 2, 2, 3, 3, 3]) == (0, 3)
    assert sequence_check([2, 1]) == (0, 0)  # order is not a loss
    # The database says there were 5: the unseen tail counts as lost.
    assert sequence_check([1, 2, 3], expected_last=5) == (2, 0)
    assert sequence_check([], expected_last=2) == (2, 0)


def test_read_frame_finds_sequence_status_and_the_final_event():
    status = '<span id="status-4" class="conv-status" data-testid="status" data-status="{s}" hx-swap-oob="outerHTML" data-frame-sequence="{n}">x</span>'
    message = status.format(s="running", n=1) + '<div id="chat-4" hx-swap-oob="beforeend"><div>hi</div></div>'
    assert read_frame(message).sequence == 1 and read_frame(message).status == "running" and not read_frame(message).final
    final = status.format(s="idle", n=23) + '<div id="timeline-4" hx-swap-oob="beforeend"><div class="event" data-event-type="status" data-sequence="23"></div></div>'
    assert read_frame(final).final and read_frame(final).sequence == 23
    # A frame read late carries the newest status, but only the status event closes the run.
    late = status.format(s="idle", n=20) + '<div data-event-type="turn_finished" data-sequence="20"></div>'
    assert not read_frame(late).final
    assert read_frame('<div id="notice-4" hx-swap-oob="true"></div>') is None


def test_summarize_level_with_server_timestamps():
    a = ConversationResult(conversation_id=1, sent_at=100.0, finished_at=102.0, completed=True,
                           receipts=[(1, 100.010), (2, 100.530), (2, 100.540), (3, 102.0)])
    b = ConversationResult(conversation_id=2, sent_at=100.0, completed=False, receipts=[(1, 100.020)], error="timed out")
    created = {(1, 1): 100.0, (1, 2): 100.5, (1, 3): 101.99, (2, 1): 100.0}
    level = summarize_level([a, b], wall_s=2.0, created=created, expected_last={1: 3, 2: 4}, cpu_s=0.5)
    assert list(level) == list(LEVEL_KEYS)
    assert level["conversations"] == 2 and level["completed"] == 1
    assert level["events"] == 4 and level["events_per_s"] == 2.0
    assert level["lost"] == 3 and level["duplicated"] == 1  # b never saw 2..4; a saw 2 twice
    assert level["ws_p50_ms"] == pytest.approx(15.0) and level["ws_p99_ms"] == pytest.approx(29.7, abs=0.1)
    assert level["run_p50_s"] == 2.0
    assert level["cpu_ms_per_event"] == 125.0


def test_summarize_level_without_server_timestamps_uses_the_message_round_trip():
    a = ConversationResult(conversation_id=1, sent_at=10.0, finished_at=11.0, completed=True, receipts=[(1, 10.05), (2, 10.9)])
    level = summarize_level([a], wall_s=1.0)
    assert level["ws_p50_ms"] == pytest.approx(50.0) and level["cpu_ms_per_event"] is None
    assert level["lost"] == 0 and level["run_p50_s"] == 1.0


def test_summarize_watchers_counts_frames_per_socket():
    created = {(7, 1): 100.0, (7, 2): 100.5, (7, 3): 101.0}
    complete = [(1, 100.01), (2, 100.52), (3, 101.03)]
    missing_one = [(1, 100.02), (3, 101.04), (3, 101.05)]  # never got 2; 3 twice counts once
    report = summarize_watchers([complete, missing_one], conversation_id=7, events=3, created=created, web_cpu_s=0.05)
    assert list(report) == list(WATCHER_KEYS)
    assert (report["sockets"], report["frames_expected"], report["frames_received"], report["lost"]) == (2, 6, 5, 1)
    assert report["ws_p50_ms"] == pytest.approx(20.0) and report["ws_p99_ms"] == pytest.approx(39.6, abs=0.1)
    assert report["web_cpu_ms_per_frame"] == 10.0
    assert summarize_watchers([[]], conversation_id=7, events=3, created=created, web_cpu_s=None)["lost"] == 3


def test_format_table_and_levels():
    table = format_table([dict.fromkeys(LEVEL_KEYS, 1) | {"cpu_ms_per_event": None}])
    assert table.splitlines()[0].startswith("| conversations | completed |") and table.splitlines()[2].endswith("| – |")
    assert parse_levels("1,10,50") == [1, 10, 50]
    for bad in ("", "0", "a,b"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_levels(bad)


def test_a_database_template_needs_postgresql_and_a_plain_name(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--database-template", "prepared"])  # no --database-url: the stack's SQLite file
    assert "--database-template needs a PostgreSQL --database-url" in capsys.readouterr().err
    assert parse_args(["--database-url", "postgres://h/p", "--database-template", "prepared"]).database_template == "prepared"
    with pytest.raises(StackError, match="not a plain identifier"):
        EmbeddedStack(database_url="postgres://h/p", template_database='x"; DROP DATABASE y; --')
    with pytest.raises(StackError, match="needs a PostgreSQL"):
        EmbeddedStack(database_url="", template_database="prepared")


def test_cpu_spent_per_process_tree():
    assert cpu_spent({"web": 1.0, "worker": 2.0}, {"web": 1.5, "worker": 4.0}) == {"web": 0.5, "worker": 2.0}
    assert cpu_spent(None, {"web": 1.0}) == {} and cpu_spent({"web": None}, {"web": 1.0}) == {}


def test_process_tree_cpu_and_database_url():
    if not Path("/proc").is_dir():
        pytest.skip("no /proc on this system")
    before = process_tree_cpu_seconds([os.getpid()])
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert process_tree_cpu_seconds([os.getpid()]) > before
    assert process_tree_cpu_seconds([]) is None
    assert run_database_url("postgres://postgres@127.0.0.1:5432/playground?sslmode=disable", "loadtest_1") == \
        "postgres://postgres@127.0.0.1:5432/loadtest_1?sslmode=disable"


# -- end to end ---------------------------------------------------------------------------------------
def run_child(command: list[str]) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


@pytest.fixture(scope="module")
def stack_database():
    """The database arguments of every stack below. Under PostgreSQL (CI) each stack's own database is
    created on that server as a copy of one prepared once for this module (tests/loadtest_template.py:
    migrated, demo data, search index built), instead of each stack migrating, loading and encoding
    the same 707 tools again (most of each test's time). On SQLite each stack prepares its own file."""
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        yield []
        return
    name = f"loadtest_template_{RUN_ID}"
    try:
        prepared = run_child([sys.executable, "-m", "tests.loadtest_template", "--database-url", database_url, "--name", name])
        assert prepared.returncode == 0, prepared.stderr[-6000:]
        yield ["--database-url", database_url, "--database-template", name]
    finally:
        drop_template(database_url, name)


@pytest.mark.slow
def test_two_conversations_end_to_end_on_an_embedded_stack(stack_database):
    command = [sys.executable, "-m", "playground.loadtest", "--conversations", "2", "--workers", "1", "--json"]
    completed = run_child(command + stack_database)
    assert completed.returncode == 0, completed.stderr[-6000:]
    report = json.loads(completed.stdout)  # stdout holds the JSON and nothing else
    assert list(report) == ["levels"] and len(report["levels"]) == 1
    level = report["levels"][0]
    assert list(level) == [*LEVEL_KEYS, *STACK_KEYS]
    assert level["provider"] == "demo" and level["worker_rss_mb"] > 0 and level["message_run_p95_s"] >= level["message_run_p50_s"]
    assert level["conversations"] == 2 and level["completed"] == 2
    assert level["lost"] == 0 and level["duplicated"] == 0
    assert level["events"] >= 2 * 3  # at least message, turn, final status per conversation
    assert level["ws_p50_ms"] is not None and level["ws_p50_ms"] >= 0
    assert level["cpu_ms_per_event"] is not None and level["cpu_ms_per_event"] > 0
    assert "stack stopped" in completed.stderr


@pytest.mark.slow
def test_watchers_read_only_sockets_on_one_conversation_see_every_frame(stack_database):
    """`--watchers 6`: one demo conversation (its words streamed, fast) watched through a share link by six
    logged-out sockets; each gets every saved event once, and the report has the issue's keys."""
    command = [sys.executable, "-m", "playground.loadtest", "--watchers", "6", "--workers", "1", "--warmup", "0",
               "--words-per-second", "200", "--json"]
    completed = run_child(command + stack_database)
    assert completed.returncode == 0, completed.stderr[-6000:]
    report = json.loads(completed.stdout)
    assert list(report) == ["watchers"] and list(report["watchers"]) == list(WATCHER_KEYS)
    watchers = report["watchers"]
    assert watchers["sockets"] == 6 and watchers["lost"] == 0
    assert watchers["frames_received"] == watchers["frames_expected"] >= 6 * 5
    assert watchers["ws_p99_ms"] is not None and watchers["web_cpu_ms_per_frame"] is not None
    assert "(share)" in completed.stderr


@pytest.mark.slow
def test_two_web_nodes_and_two_workers_deliver_every_event_across_nodes(stack_database):
    """More machines by adding nodes: each conversation is started and its message sent through one
    daphne, run by either Celery worker, and watched through the other daphne — its frames cross
    nodes through the Redis channel layer, and none is lost or repeated."""
    command = [sys.executable, "-m", "playground.loadtest", "--conversations", "4", "--web-nodes", "2",
               "--worker-nodes", "2", "--workers", "1", "--json"]
    completed = run_child(command + stack_database)
    assert completed.returncode == 0, completed.stderr[-6000:]
    level = json.loads(completed.stdout)["levels"][0]
    assert (level["conversations"], level["completed"], level["lost"], level["duplicated"]) == (4, 4, 0, 0), completed.stderr[-3000:]
    assert "web2" in completed.stderr and "worker2" in completed.stderr  # the second nodes ran and were measured


@pytest.mark.slow
def test_a_prompt_answered_through_the_other_node_resumes_the_run(stack_database):
    """Two daphne and two workers on one database and Redis (tests/nodes_prompt.py): the conversation
    is started through node A and reaches a permission prompt (a global ask rule); node B watches it
    live and answers the prompt with its form; the run resumes on either worker, and node B sees every
    event once, in order, as a reload through node A does."""
    command = [sys.executable, "-m", "tests.nodes_prompt"]
    completed = run_child(command + stack_database)
    assert completed.returncode == 0, completed.stderr[-6000:]
    report = json.loads(completed.stdout)
    types = report["types"]
    assert report["prompt_sequence"] and types[report["prompt_sequence"] - 1] == "permission_prompt"
    assert report["answer_http_status"] in (302, 303) and report["answer_choice"] == "once"
    # The run went on after the answer: the tool ran (not denied, not timed out) and the run finished.
    assert types.index("permission_answer") < types.index("tool_result") and not report["tool_result_error"]
    assert report["final_status"] == "idle" and types[-1] == "status"
    assert report["received"] == list(range(1, report["saved_last"] + 1))
    assert (report["lost"], report["duplicated"]) == (0, 0)
    assert report["replayed"] == report["received"]
    # Two tasks: the one that paused at the prompt and the one the answer queued, on whichever worker.
    assert [task for _, task in report["tasks"]] == ["conversations.run_conversation", "conversations.resume_conversation"], report["tasks"]
    assert {node for node, _ in report["tasks"]} <= {"worker", "worker2"}


@pytest.mark.slow
def test_the_real_provider_path_through_the_sdk_and_the_api_double_process():
    """`--provider anthropic`: the workers reach the project's API double, run as its own HTTP process,
    through the official SDK; each message takes a ToolSearch call and an answer (two model calls)."""
    command = [sys.executable, "-m", "playground.loadtest", "--conversations", "2", "--workers", "1", "--warmup", "1",
               "--provider", "anthropic", "--model-latency", "0.2", "--json"]
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        command += ["--database-url", database_url]
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert completed.returncode == 0, completed.stderr[-6000:]
    level = json.loads(completed.stdout)["levels"][0]
    assert (level["conversations"], level["completed"], level["lost"], level["duplicated"]) == (2, 2, 0, 0)
    # Two calls, each 0.2 s late. The run's clock starts once the message is accepted, which can be a few ms
    # after the worker began the first call (CI measured 0.393 s once): more than one late call, not exactly two.
    assert level["provider"] == "anthropic" and level["message_run_p50_s"] > 1.5 * 0.2


def test_the_api_double_answers_like_a_model_through_the_official_sdks():
    import anthropic
    import openai

    from playground.loadtest.api_double import ANSWER, make_double

    tools = [{"name": "ToolSearch", "description": "Search tools.", "input_schema": {"type": "object"}}]
    with make_double("anthropic", 0) as double:
        client = anthropic.Anthropic(api_key="sk-test", base_url=double.url, max_retries=0)
        first = client.messages.create(model="claude-test", max_tokens=100, tools=tools,
                                       messages=[{"role": "user", "content": "weather in Paris?"}])
        assert first.stop_reason == "tool_use" and first.content[-1].name == "ToolSearch"
        call = first.content[-1]
        second = client.messages.create(model="claude-test", max_tokens=100, tools=tools, messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "nothing"}]}])
        assert second.content[0].text == ANSWER
        with pytest.raises(anthropic.BadRequestError):  # what the real API rejects, the double rejects
            client.messages.create(model="claude-test", max_tokens=100, messages=[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"}]}])
    with make_double("openai", 0) as double:
        client = openai.OpenAI(api_key="sk-test", base_url=double.url, max_retries=0)
        functions = [{"type": "function", "function": {"name": "ToolSearch", "parameters": {"type": "object", "properties": {}}}}]
        reply = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}], tools=functions)
        assert reply.choices[0].message.tool_calls[0].function.name == "ToolSearch"
        # Responses API: a tool's output is answered even when the wire adds a message after it (the
        # tools it loaded, as a user message); a person's message gets the ToolSearch call.
        responses_tools = [{"type": "function", "name": "ToolSearch", "parameters": {"type": "object", "properties": {}}}]
        first = client.responses.create(model="gpt-test", input=[{"role": "user", "content": "hi"}], tools=responses_tools)
        assert first.output[0].type == "function_call" and first.output[0].name == "ToolSearch"
        second = client.responses.create(model="gpt-test", tools=responses_tools, input=[
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": first.output[0].call_id, "name": "ToolSearch", "arguments": "{}"},
            {"type": "function_call_output", "call_id": first.output[0].call_id, "output": "found"},
            {"role": "user", "content": "Tools loaded: get_weather."}])
        assert second.output[0].type == "message" and second.output_text == ANSWER
