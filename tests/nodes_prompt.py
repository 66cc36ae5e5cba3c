"""A permission prompt across nodes, run as a child process by tests/test_loadtest.py.

It brings up the load test's embedded stack with two web nodes (two daphne) and two worker nodes
(two Celery workers) on one database and one Redis, adds a global "ask" rule for the demo agent's
time tool, then: starts a conversation and sends its message through node A, watches it through
node B's socket, answers the prompt through node B's answer form, and reads on until the run's final
status. It prints one JSON object (what the test asserts) and nothing else on stdout.

    python -m tests.nodes_prompt [--database-url postgres://… [--database-template NAME]]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time

from playground.loadtest.client import Session, open_socket
from playground.loadtest.stack import EmbeddedStack
from playground.loadtest.stats import read_frame, sequence_check

TIME = "mcp__time__get_current_time"
QUESTION = "What time is it in Tokyo?"
DEADLINE_SECONDS = 120


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def scenario(stack: EmbeddedStack, node_a: Session, node_b: Session) -> dict:
    deadline = time.monotonic() + DEADLINE_SECONDS
    conversation_id = await asyncio.to_thread(node_a.new_conversation)
    watch = await open_socket(node_b, f"/ws/conversations/{conversation_id}/")
    await watch.send_text(json.dumps({"action": "hello", "last_sequence": 0}))
    await asyncio.to_thread(node_a.send_message, conversation_id, QUESTION)
    prompt_pattern = re.compile(rf'id="prompt-{conversation_id}-(\d+)"')
    received: list[int] = []
    prompt_sequence, answered_status, final_status = 0, 0, ""
    try:
        while True:
            text = await asyncio.wait_for(watch.receive(), max(0.1, deadline - time.monotonic()))
            if text is None:
                raise RuntimeError(f"node B's socket closed (code {watch.close_code})")
            frame = read_frame(text)
            if frame is None:
                continue
            received.append(frame.sequence)
            prompt = prompt_pattern.search(text)
            if prompt and not prompt_sequence and 'data-testid="answer-once"' in text:
                prompt_sequence = int(prompt.group(1))
                # The answer form's POST through the other node (what the page falls back to).
                answered_status, _, _ = await asyncio.to_thread(node_b.request, f"/conversations/{conversation_id}/answer/", {
                    "csrfmiddlewaretoken": node_b._cookie("csrftoken"), "prompt": str(prompt_sequence), "choice": "once",
                })
            if frame.final:
                final_status = frame.status
                break
    finally:
        await watch.close()

    # A reload through node A replays the same rows from the database.
    replay_socket = await open_socket(node_a, f"/ws/conversations/{conversation_id}/")
    await replay_socket.send_text(json.dumps({"action": "hello", "last_sequence": 0}))
    replayed: list[int] = []
    try:
        while not replayed or replayed[-1] < received[-1]:
            text = await asyncio.wait_for(replay_socket.receive(), max(0.1, deadline - time.monotonic()))
            if text is None:
                break
            frame = read_frame(text)
            if frame is not None:
                replayed.append(frame.sequence)
    finally:
        await replay_socket.close()
    return {"conversation_id": conversation_id, "prompt_sequence": prompt_sequence, "answer_http_status": answered_status,
            "received": received, "replayed": replayed, "final_status": final_status}


def facts(conversation_id: int) -> dict:
    from django.db import connections

    from playground.conversations.models import Event

    events = list(Event.objects.filter(conversation_id=conversation_id).order_by("sequence").values_list("sequence", "type", "payload"))
    connections.close_all()
    result = next((payload for _, kind, payload in events if kind == "tool_result" and payload.get("name") == TIME), {})
    answer = next((payload for _, kind, payload in events if kind == "permission_answer"), {})
    return {"saved_last": events[-1][0] if events else 0, "types": [kind for _, kind, _ in events],
            "answer_choice": answer.get("choice", ""), "tool_result_error": bool(result.get("is_error", True))}


def tasks_run(log: str) -> list[list[str]]:
    """[worker node, task] for each conversation task a worker finished, from the stack's log."""
    pattern = re.compile(r"^\[(worker\d*)\].*Task (conversations\.(?:run|resume)_conversation)\[[^\]]+\] succeeded", re.MULTILINE)
    return [[node, task] for node, task in pattern.findall(log)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--database-template", default="")
    args = parser.parse_args()
    stack = EmbeddedStack(workers=1, database_url=args.database_url, log=say, web_nodes=2, worker_nodes=2,
                          template_database=args.database_template)
    failed = True
    try:
        stack.start()
        from django.db import connections

        from playground.registry.models import PermissionRule

        PermissionRule.objects.create(effect="ask", pattern=TIME, note="two-node prompt test")
        connections.close_all()
        node_a, node_b = Session(stack.base_urls[0]), Session(stack.base_urls[1])
        node_a.login(stack.username, stack.password)
        node_b.login(stack.username, stack.password)
        report = asyncio.run(scenario(stack, node_a, node_b))
        report |= facts(report["conversation_id"])
        report["tasks"] = tasks_run(stack.log_tail(200_000))
        report["lost"], report["duplicated"] = sequence_check(report["received"], expected_last=report["saved_last"])
        print(json.dumps(report))
        failed = False
        return 0
    except Exception as error:  # noqa: BLE001 - reported with the stack's log for the test to show
        say(f"!!! {error.__class__.__name__}: {error}\n{stack.log_tail()}")
        return 1
    finally:
        stack.stop(keep_log=failed)


if __name__ == "__main__":
    sys.exit(main())
