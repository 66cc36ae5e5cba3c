"""Cancelling a tool call in flight: the executor stops waiting at once and the server is told through
the protocol (`notifications/cancelled`), which the demo server's `slow` tool records."""
from __future__ import annotations

import json
import sys
import threading

import pytest

from playground.engine.execution import CancelSignal, CallCancelled
from playground.engine.tools import Tool
from playground.mcp_servers.executor import PlaygroundExecutor
from playground.mcp_servers.models import McpServer
from tests.mcp_servers.conftest import DEMO_ARGS
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]


@pytest.fixture
def recording_server(db, tmp_path):
    log = tmp_path / "cancelled.jsonl"
    McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS,
                             env={"DEMO_SERVER_SLOW_LOG": str(log)})
    return log


def cancelled_calls(log) -> list[dict]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [entry for entry in lines if entry["event"] == "cancelled"]


def test_a_cancelled_call_stops_and_the_server_hears_the_cancel(recording_server):
    executor, signal = PlaygroundExecutor(), CancelSignal()
    slow = Tool(name="mcp__demo__slow", is_mcp=True)
    assert executor.execute(Tool(name="mcp__demo__echo", is_mcp=True), {"text": "warm"}).text() == "warm"  # connected
    threading.Timer(1.0, signal.set).start()
    with pytest.raises(CallCancelled):
        executor.execute(slow, {"seconds": 60}, timeout=90, cancel=signal)
    seen = wait_until(lambda: cancelled_calls(recording_server), "the server recorded the cancel", 20)
    assert seen[0]["tool"] == "slow" and seen[0]["cancelled_after"] < 60
    # The session is still good for the next call.
    assert executor.execute(Tool(name="mcp__demo__add", is_mcp=True), {"a": 1, "b": 2}).text() == "3.0"


def test_a_signal_set_before_the_call_cancels_it_at_once(recording_server):
    signal = CancelSignal()
    signal.set()
    with pytest.raises(CallCancelled):
        PlaygroundExecutor().execute(Tool(name="mcp__demo__slow", is_mcp=True), {"seconds": 60}, timeout=90, cancel=signal)


def test_an_unset_signal_changes_nothing(recording_server):
    outcome = PlaygroundExecutor().execute(Tool(name="mcp__demo__slow", is_mcp=True), {"seconds": 0.1}, cancel=CancelSignal())
    assert outcome.text() == "slept 0.1 s" and not outcome.is_error
    assert cancelled_calls(recording_server) == []
