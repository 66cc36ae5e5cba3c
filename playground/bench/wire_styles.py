"""One turn per wire style on the demo catalog (706 deferred MCP tools): plan, wire request, tokens seen.

    .venv/bin/python -m playground.bench.wire_styles [--runs 30]

For each style (as `toolsearch request --wire` names it) a fresh `plan_turn` over a history that
discovered two tools, then `wire_request()` and `wire_tokens`: what the loop asks of every turn.
Printed: the median and p90 in milliseconds. Plain Python (no Django); the settings come from the
cost command's table, which both the code before the wire-style family (e2b5cb0) and after it have,
so the same file times either: `PYTHONPATH=<old checkout> python <this file>`.
"""
from __future__ import annotations

import argparse
import statistics
import time

from playground.engine.cache_cost import COST_WIRE_STYLES
from playground.engine.catalog_io import load_catalog
from playground.engine.permissions import PermissionPolicy
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.backends import get_backend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.turn import plan_turn
from playground.registry.demo_data import CATALOGS

FOUND = ["mcp__github__create_issue", "mcp__slack__slack_post_message"]
HISTORY = [
    {"role": "user", "content": "File an issue and tell the team."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "select:x"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
        {"type": "tool_reference", "tool_name": n} for n in FOUND]}, {"type": "text", "text": "Tool loaded."}]},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    catalog = load_catalog(CATALOGS[0])
    backend, counter, policy = get_backend("default"), CharEstimateCounter(), PermissionPolicy()
    print(f"{'wire':18} {'median ms':>10} {'p90 ms':>8}   ({len(catalog)} tools, {args.runs} runs)")
    for wire, fields in COST_WIRE_STYLES.items():
        settings = AgentSettings(prompt_cache=True, **fields)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            turn = plan_turn(catalog, policy, settings, ConversationState(list(HISTORY)), token_counter=counter, backend=backend)
            turn.wire_request()
            turn.wire_tokens  # noqa: B018 - the accounting the loop records
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        print(f"{wire:18} {statistics.median(times):>10.2f} {times[int(0.9 * (len(times) - 1))]:>8.2f}")


if __name__ == "__main__":
    main()
