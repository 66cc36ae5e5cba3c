"""Every wire style's requests for fixed conversations, rendered for the golden test.

`render()` gives, per style: what `toolsearch request` prints (a first request, and one after a
discovery), the requests of a simulated conversation that discovers tools (the style's own history
after a discovery, cached and not, and its all-tools baseline), its cost figures, and what one
`TurnPlan` answers over a fixed history (wire request, tokens, announcement, cache vendor, the
call check). `tests/engine/goldens/wire_styles.json` holds the output captured at e2b5cb0, before
the wire styles became one family (and a style added since, from when it was added); `test_wire_goldens.py`
compares, and fails for a style rendered without a golden entry. Regenerate (only for an
intended change, saying why in the commit): `python -m tests.engine.wire_goldens`.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from playground.engine.cache_cost import COST_WIRE_STYLES, conversation_cost, first_and_steady, simulate
from playground.engine.catalog_io import load_catalog
from playground.engine.permissions import PermissionPolicy, PermissionRule
from playground.engine.pricing import price_table
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.backends import get_backend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.turn import plan_turn
from playground.toolsearch.cli import REQUEST_WIRE_STYLES, main

GOLDEN = Path(__file__).parent / "goldens" / "wire_styles.json"
# 36 tools of the demo catalog (two servers with fewer than 10 tools, one with 26: a namespace in parts,
# one made always-loaded) and two built-ins, one deferred by its own flag.
DEMO_CATALOG = str(Path(__file__).parent / "goldens" / "catalog.jsonl")
DISCOVERED = "mcp__github__create_issue,mcp__slack__slack_post_message"
# The default table (its OpenAI row priced from a dated secondary source) and one override read the way
# a PRICE_TABLE is (a model the defaults do not know, priced by its vendor's caching).
PRICES = price_table('{"gpt-9-test": {"input": 1.25, "output": 10}, "claude-test-9": {"input": 2, "output": 8}}')


def _cli(*argv: str) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


def _digest(body: dict[str, Any]) -> str:
    """A request body's SHA-256 (its JSON with sorted keys): the simulated conversations' requests are
    many and long, so the golden keeps their digests; the first of each style is kept in full."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def settings_for(wire: str, **extra: Any) -> AgentSettings:
    """The engine settings of a command-line wire name (anthropic-native … openai-functions)."""
    fields = dict(COST_WIRE_STYLES[wire])
    fields.update(extra)
    return AgentSettings(**fields)


def _fixed_history(catalog) -> list[dict[str, Any]]:
    """A conversation whose ToolSearch loaded two tools, answered in the native style's shape (the
    engine's history shape whatever the wire), then one call of a found tool."""
    return [
        {"role": "user", "content": "File an issue and tell the team."},
        {"role": "assistant", "content": [{"type": "text", "text": "Searching."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                                           "input": {"query": f"select:{DISCOVERED}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "tool_reference", "tool_name": n} for n in DISCOVERED.split(",")]},
            {"type": "text", "text": "Tool loaded."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "mcp__github__create_issue",
                                           "input": {"title": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "created #1"}]},
    ]


def _turn_answers(catalog, wire: str, **extra: Any) -> dict[str, Any]:
    counter = CharEstimateCounter()
    policy = PermissionPolicy([PermissionRule(pattern="mcp__slack__slack_add_reaction", effect="deny")])
    settings = settings_for(wire, prompt_cache=True, **extra)
    turn = plan_turn(catalog, policy, settings, ConversationState(_fixed_history(catalog)), token_counter=counter,
                     backend=get_backend("default"))
    checks = {name: [c.verdict, c.refusal, c.message] for name in
              ("ToolSearch", "mcp__github__create_issue", "mcp__slack__slack_post_message", "mcp__slack__slack_add_reaction",
               "mcp__github__list_issues", "nope")
              for c in [turn.check_call(name)]}
    return {
        "wire_request": turn.wire_request(),
        "wire_tokens": turn.wire_tokens.to_dict(),
        "announcement": turn.wire_announcement.text if turn.wire_announcement else None,
        "sent_tool_names": sorted(turn.sent_tool_names),
        "cache_vendor": turn.cache_vendor,
        "caches_prompt": turn.caches_prompt,
        "all_tools_request": _digest(turn.all_tools_request()),
        "checks": checks,
        "first_and_steady": first_and_steady(turn, PRICES, counter),
    }


def render() -> dict[str, Any]:
    catalog = load_catalog(DEMO_CATALOG)
    out: dict[str, Any] = {"request": {}, "simulated": {}, "cost": {}, "turn": {}}
    for wire in REQUEST_WIRE_STYLES:
        out["request"][wire] = {
            "first": _cli("request", "--catalog", DEMO_CATALOG, "--wire", wire, "--json"),
            "discovered": _cli("request", "--catalog", DEMO_CATALOG, "--wire", wire, "--json", "--discovered", DISCOVERED),
            "grouped_off": _digest(_cli("request", "--catalog", DEMO_CATALOG, "--wire", wire, "--json", "--mode", "false",
                                "--layout", "grouped")),
        }
    out["request"]["anthropic-server-regex"] = _cli("request", "--catalog", DEMO_CATALOG, "--wire", "anthropic-server",
                                                    "--json", "--server-search", "regex", "--discovered", DISCOVERED)
    for wire in COST_WIRE_STYLES:
        out["simulated"][wire] = {
            label: [[at, _digest(body)] for at, body in
                    simulate(catalog, wire, turns=4, discover=3, prompt_cache=cached, baseline=baseline,
                             ttl="1h" if cached else "5m").requests]
            for label, cached, baseline in (("cached", True, False), ("uncached", False, False), ("baseline", True, True))
        }
        out["simulated"][wire]["last_cached_request"] = simulate(catalog, wire, turns=4, discover=3, ttl="1h").requests[-1][1]
        out["cost"][wire] = conversation_cost(catalog, wire, turns=4, discover=3, table=PRICES).figures
        if wire != "all-tools":
            out["turn"][wire] = _turn_answers(catalog, wire)
            out["turn"][f"{wire}/off"] = _turn_answers(catalog, wire, mode="false")
    out["prices"] = {model: PRICES.price(model).to_dict() for model in ("gpt-9-test", "claude-test-9")}
    return json.loads(json.dumps(out, default=str))


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(render(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size:,} bytes)")
