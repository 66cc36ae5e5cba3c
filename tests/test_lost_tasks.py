"""The watch for work whose task the broker lost (playground/lost_tasks.py): its parts that do not
belong to one app. Each kind's own behaviour is tested with its app; the real Redis restart in
tests/conversations/test_broker_restart.py."""
from __future__ import annotations

import base64
import json

from playground import lost_tasks
# Importing the apps' task modules (as a worker does) registers their kinds and sweeps.
from playground.conversations import tasks as _conversations  # noqa: F401
from playground.evaluation import tasks as _evaluation  # noqa: F401
from playground.mcp_servers import tasks as _mcp  # noqa: F401
from playground.registry import tasks as _registry  # noqa: F401


def message(task: str, args: list) -> bytes:
    body = base64.b64encode(json.dumps([args, {}, {}]).encode()).decode()
    return json.dumps({"body": body, "headers": {"task": task, "id": "x"}, "properties": {"body_encoding": "base64"}}).encode()


def kind(name: str, task: str, rows: dict, settled: list, *, broken: bool = False) -> lost_tasks.Kind:
    def unclaimed(grace: float) -> dict:
        if broken:
            raise RuntimeError("this kind cannot be read")
        return dict(rows)

    def lost(row, key) -> str:
        settled.append((name, row, key))
        rows.pop(row)
        return lost_tasks.REQUEUED

    return lost_tasks.Kind(name=name, tasks=frozenset({task}), key_of=lost_tasks.first_arg, unclaimed=unclaimed, lost=lost)


def test_messages_are_read_from_the_queue_and_from_unacked_entries():
    assert lost_tasks.task_of(message("evaluation.run_evaluation", [5])) == ("evaluation.run_evaluation", [5])
    unacked = json.dumps([json.loads(message("mcp_servers.sync_server", [7])), "", "celery"])
    assert lost_tasks.task_of(unacked) == ("mcp_servers.sync_server", [7])
    assert lost_tasks.task_of(b"not json") is None
    assert lost_tasks.task_of(json.dumps({"body": "e30=", "headers": {}})) is None


def test_the_same_key_of_two_kinds_is_not_confused(monkeypatch):
    settled: list = []
    runs = kind("run", "evaluation.run_evaluation", {5: "5"}, settled)
    syncs = kind("sync", "mcp_servers.sync_server", {5: "5"}, settled)
    # The broker holds the run's task 5, not the sync's task 5.
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds",
                        lambda url, queue, grace: [("evaluation.run_evaluation", ["5"]), ("other.task", [5])])
    _, missing = lost_tasks.lost_round({}, [runs, syncs])
    assert missing == {("sync", 5): "5"}
    outcome, _ = lost_tasks.lost_round(missing, [runs, syncs])
    assert outcome["requeued"] == 1 and settled == [("sync", 5, "5")]


def test_a_kind_that_cannot_be_read_does_not_hold_up_the_others(monkeypatch):
    settled: list = []
    broken = kind("broken", "a.task", {1: "1"}, settled, broken=True)
    fine = kind("fine", "b.task", {2: "2"}, settled)
    monkeypatch.setattr(lost_tasks, "messages_the_broker_holds", lambda url, queue, grace: [])
    _, missing = lost_tasks.lost_round({}, [broken, fine])
    lost_tasks.lost_round(missing, [broken, fine])
    assert settled == [("fine", 2, "2")]


def test_a_sweep_that_fails_does_not_stop_the_others():
    def failing() -> int:
        raise RuntimeError("boom")

    assert lost_tasks.run_sweeps([lost_tasks.Sweep("failing", failing), lost_tasks.Sweep("fine", lambda: 2)]) == 2


def test_every_app_declares_what_it_queues():
    assert set(lost_tasks.KINDS) >= {"conversation", "evaluation run", "MCP server sync", "search index build"}
    assert "permission prompts" in lost_tasks.SWEEPS
    watched = {task for each in lost_tasks.KINDS.values() for task in each.tasks}
    assert {"conversations.run_conversation", "conversations.resume_conversation", "evaluation.run_evaluation",
            "mcp_servers.sync_server", "registry.build_search_index"} <= watched
