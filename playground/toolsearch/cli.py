"""`python -m playground.toolsearch search|eval|bench|announce|request|cost`: the engine from a terminal, no database.

Exit codes: 0 done, 2 bad input (unreadable or malformed catalog / query file, unknown backend,
bad arguments); the message names the file and line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from playground.engine.announcements import announce, estimate_tokens
from playground.bench.scorer import BenchConfig, format_table, run_bench, scaled_catalog, source_tools
from playground.engine.cache_cost import DEFAULT_MODEL as DEFAULT_COST_MODEL
from playground.engine.cache_cost import (
    COST_WIRE_STYLES,
    SECONDS_BETWEEN_TURNS,
    conversation_cost,
    default_model,
    first_and_steady,
    recorded_cost,
)
from playground.engine.catalog_io import CatalogFormatError, load_catalog, load_queries, toolsets_dir
from playground.engine.evaluate import evaluate
from playground.engine.openai_wire import tool_tokens
from playground.engine.permissions import PermissionPolicy
from playground.engine.pricing import PriceTable, PriceTableError, price_table
from playground.engine.prompt_cache import CACHE_TTLS, DEFAULT_TTL
from playground.engine.requests import AgentSettings, ConversationState
from playground.bench import search_speed
from playground.engine.search import learning_eval, quality
from playground.engine.search.backends import BENCH_BACKENDS, BUILTIN_BACKENDS, backend_from_spec, get_backend
from playground.engine.search.base import SearchBackend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.toolsearch_tool import run_tool_search
from playground.engine.tools import ToolCatalog
from playground.engine.turn import plan_turn
from playground.engine.wires.anthropic_server import SERVER_SEARCH_TOOLS
from playground.engine.wires.registry import wire_style, wire_styles

EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """A problem with what the user gave us: printed as one line, exit code 2."""


def _backend(name: str) -> SearchBackend:
    try:
        return get_backend(name)
    except ValueError as exc:
        raise BadInput(f"{exc} (built in: default, {', '.join(BUILTIN_BACKENDS)}; or a dotted path)") from None


def _int_at_least(low: int):
    """An argparse type: an integer of at least `low`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be at least {low}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds, at least 0")
    return value


_positive = _int_at_least(1)
_not_negative = _int_at_least(0)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes wants comma-separated integers, got {text!r}") from None
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("--sizes wants positive integers, e.g. 1000,10000,100000")
    return sizes


def cmd_search(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    backend = _backend(args.backend)
    result = backend.search(args.query, catalog, max_results=args.max_results)
    if result.scored:
        results = [s.to_dict() for s in result.scored]
    else:  # select / exact / prefix answers carry no score
        results = [{"name": name, "score": None, "breakdown": []} for name in result.matches]
    if args.json:
        print(json.dumps({"matches": result.matches, "results": results}, ensure_ascii=False, indent=2))
        return 0
    reading = result.reading
    print(f"query: {args.query!r} read as {reading.kind}", end="")
    if reading.kind == "keyword":
        print(f" (required: {', '.join(reading.required) or '-'}; optional: {', '.join(reading.optional) or '-'})", end="")
    print(f"; backend {backend.name}; {result.total_deferred_tools} deferred of {len(catalog)} tools")
    if reading.note:
        print(f"note: {reading.note}")
    if not result.matches:
        print("no matching deferred tools")
    for rank, item in enumerate(results, start=1):
        score = "" if item["score"] is None else f"  score {item['score']:g}"
        print(f"{rank:>3}. {item['name']}{score}")
        for part in item["breakdown"]:
            where = f" [{part['field']}{': ' + part['detail'] if part['detail'] else ''}]" if part["field"] else ""
            print(f"       {part['points']:+g}  {part['term']!r} {part['rule']}{where}")
    for name in result.not_found:
        print(f"  not found: {name}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    if args.learn_from != "none":
        return cmd_eval_learning(args)
    if args.toolsets:
        return cmd_eval_suite(args)
    if not (args.catalog and args.queries):
        raise BadInput("eval needs --catalog and --queries, or --toolsets NAME[,NAME] (or all)")
    if args.style != "natural":
        queries = [replace(q, query=quality.styled_query(q.query, args.style)) for q in load_queries(args.queries)]
        args.queries_override = queries
    catalog = load_catalog(args.catalog)
    queries = getattr(args, "queries_override", None) or load_queries(args.queries)
    missing = sorted({name for q in queries for gold in q.expected_tool_names for name in q.accepted_names(gold) if name not in catalog})
    if missing:
        raise BadInput(f"{args.queries}: {len(missing)} labelled tool(s) are not in {args.catalog}, e.g. {missing[0]!r}")
    report = evaluate(catalog, queries, _backend(args.backend), k=args.k)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        return 0
    m = report.metrics()
    k = m["k"]
    print(f"backend {m['backend']} over {m['tools']} tools, {m['query_count']} queries (index built in {m['build_s']:.3f} s)")
    print(f"  top-1         {m['top_1']:.3f}")
    print(f"  MRR@10        {m['mrr']:.3f}")
    print(f"  recall@{k}      {m['recall_at_k']:.3f}")
    print(f"  recall@10     {m['recall_at_10']:.3f}")
    print(f"  full hit@{k}    {m['full_hit_at_k']:.3f}")
    print(f"  latency       p50 {m['p50_ms']:.3f} ms, p95 {m['p95_ms']:.3f} ms")
    return 0


def cmd_eval_learning(args: argparse.Namespace) -> int:
    """`eval --learn-from dev`: for each toolset (default: every shared one), a learned ranking trained
    on its dev split, and its test split before, with the usage field only, and after."""
    if args.style == "both":
        raise BadInput("--learn-from measures one query style at a time: --style natural or keyword")
    if args.split != "test" or args.usage_from != "none" or args.catalog or args.queries:
        raise BadInput("--learn-from dev trains on the dev split and reports the test split of --toolsets (no --split, --usage-from, --catalog)")
    names = list(quality.TOOLSETS) if args.toolsets in (None, "all") else [t.strip() for t in args.toolsets.split(",") if t.strip()]
    progress = (lambda fraction, message: print(f"... {fraction:5.1%} {message}", file=sys.stderr, flush=True)) if args.progress else None
    try:
        backend = backend_from_spec(args.backends or args.backend)
        results = learning_eval.run_learning(names, backend, style=args.style, limit=args.limit,
                                             root=Path(args.toolsets_dir) if args.toolsets_dir else None, progress=progress)
    except ValueError as exc:  # an unknown toolset, a backend that cannot learn (no dense side)
        raise BadInput(str(exc)) from None
    if args.json:
        print(json.dumps({"learn_from": args.learn_from, "split": "test", "limit": args.limit, "style": args.style,
                          "results": [r.to_dict() for r in results]}, ensure_ascii=False, indent=2))
        return 0
    print(f"learned from each toolset's {args.learn_from} split, measured on its test split"
          f"{f' ({args.limit} sampled queries)' if args.limit else ''}; {args.style} requests; in-domain, not zero-shot")
    print(learning_eval.format_learning(results))
    return 0


def split_specs(text: str) -> list[str]:
    """Comma-separated backend specs; a comma inside a JSON value ({...} or [...]) does not split."""
    specs, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            specs.append(text[start:i])
            start = i + 1
    specs.append(text[start:])
    return [s.strip() for s in specs if s.strip()]


def cmd_eval_suite(args: argparse.Namespace) -> int:
    """Every toolset × backend × query style on one split: the search-quality table."""
    names = list(quality.TOOLSETS) if args.toolsets == "all" else [t.strip() for t in args.toolsets.split(",") if t.strip()]
    backends = split_specs(args.backends) if args.backends else [args.backend]
    styles = list(quality.STYLES) if args.style == "both" else [args.style]
    root = Path(args.toolsets_dir) if args.toolsets_dir else None
    progress = (lambda fraction, message: print(f"... {fraction:5.1%} {message}", file=sys.stderr, flush=True)) if args.progress else None
    try:
        results = quality.run_suite(names, backends, styles, split=args.split, limit=args.limit, root=root, progress=progress,
                                    usage_from=args.usage_from)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if args.json:
        print(quality.results_json(results, split=args.split, limit=args.limit, toolsets=names, backends=backends, styles=styles,
                                   usage_from=args.usage_from, default_gaps=[gap.to_dict() for gap in quality.default_gaps(results)]))
        return 0
    print(f"split {args.split}{f', {args.limit} sampled queries per toolset' if args.limit else ''}; recall/full hit at 5 and 10, MRR@10; latency per search")
    if args.usage_from != "none":
        print(f"learned from usage: the {args.usage_from} split's queries are the log of past searches (+usage rows; not zero-shot)")
    print(quality.format_table(results))
    print()
    print(quality.format_answer_rates(results))
    print()
    print(quality.format_gaps(results))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    folder = Path(args.toolsets) if args.toolsets else toolsets_dir()
    if not folder.is_dir():
        raise BadInput(f"toolsets folder {folder} not found (set TOOLSETS_DIR or --toolsets)")
    config = BenchConfig(
        sizes=args.sizes,
        queries=args.queries,
        naive_queries_at_100k=args.naive_queries_at_100k,
        naive_budget_s=args.naive_budget,
        repeat=args.repeat,
        measure_memory=not args.no_memory,
    )
    progress = (lambda message: print(f"... {message}", file=sys.stderr, flush=True)) if not args.json else (lambda message: None)
    try:
        rows = run_bench(folder, config, progress)
    except FileNotFoundError as exc:
        raise BadInput(str(exc)) from None
    search_backends = split_specs(args.search_backends or "")
    if search_backends:  # the retrieval backends, same catalogs, queries and row shape
        try:
            rows += search_speed.run(folder, backends=search_backends, sizes=args.sizes, queries=args.queries, repeat=args.repeat,
                              usage_entries=args.usage_entries, progress=progress)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    if args.json:
        print(json.dumps([row.to_dict(details=args.details) for row in rows], indent=2))
        return 0
    print(f"ToolSearch keyword scoring: claude-code (indexed) vs naive (plain transcription); toolsets from {folder}")
    print(format_table(rows))
    if search_backends:
        for model_id, runtime, rate in search_speed.encoder_rates(folder, search_backends):
            print(f"encoder {model_id} on {runtime}: {rate:.0f} tool documents/s (cold: no cache)")
    return 0


def announcement_figures(catalog, layout: str, *, budget: int = 0, context_window: int = 200_000,
                         prices: PriceTable | None = None, model: str = "") -> dict:
    """A first turn's tool overhead with the default loaded tools, for one announcement layout.

    `fits_window` is false when the request builder would refuse the layout (its list is above the
    cap) and send the budgeted one instead; the figures are still the refused layout's own. `cache`:
    the whole request, with cache breakpoints, and its all-tools baseline as a first turn and in the
    steady state, split by the prompt cache model and priced (`cache_cost.first_and_steady`): the
    raw token share above, the dollars beside it.
    """
    counter = CharEstimateCounter()
    settings = AgentSettings(mode="true", announcement_layout=layout, announcement_budget=budget, context_window=context_window,
                             prompt_cache=True, model=model or DEFAULT_COST_MODEL)
    state = ConversationState([{"role": "user", "content": "hello"}])
    turn = plan_turn(catalog, PermissionPolicy(), settings, state, token_counter=counter)
    plan = turn.request
    asked = announce(plan.deferred_tools, [], "full", layout=layout, budget_tokens=settings.announcement_budget_tokens)
    announcement_tokens = estimate_tokens(asked.text)
    first_turn = plan.tokens.sent_tokens + announcement_tokens
    everything = plan.tokens.baseline_tokens
    cache = first_and_steady(turn, prices or PriceTable(), counter)
    return {
        "style": layout,
        "tools": len(catalog),
        "announcement_tokens": announcement_tokens,
        "first_turn_tool_tokens": first_turn,
        "all_tools_tokens": everything,
        "saved_share": round(1 - first_turn / everything, 4) if everything else 0.0,
        "fits_window": announcement_tokens <= settings.announcement_max_tokens,
        "cache": cache,
    }


def cmd_announce(args: argparse.Namespace) -> int:
    if args.sizes:
        return cmd_announce_table(args)
    if not args.catalog:
        raise BadInput("announce needs --catalog FILE, or --sizes N[,N] to grow catalogs from the shared toolsets")
    catalog = load_catalog(args.catalog)
    try:
        figures = announcement_figures(catalog, args.style, budget=args.budget, context_window=args.context_window,
                                       prices=price_table(args.prices or ""), model=args.model)
    except (ValueError, PriceTableError) as exc:
        raise BadInput(str(exc)) from None
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"{figures['style']} announcement of {figures['tools']:,} tools: {figures['announcement_tokens']:,} tokens")
    print(f"first turn's tools + announcement: {figures['first_turn_tool_tokens']:,} tokens "
          f"(every tool in full: {figures['all_tools_tokens']:,}; saved {figures['saved_share']:.1%})")
    cache = figures["cache"]
    for label, name in (("request", "this request"), ("all_tools", "every tool in full")):
        first, steady = cache[label]["first"], cache[label]["steady"]
        print(f"{name}, cached ({cache['model']}, TTL {cache['ttl']}): {first['input_tokens']:,} input tokens; "
              f"first turn {_dollars(first['cost_usd'])} ({first['cache_write_tokens']:,} written), "
              f"steady state {_dollars(steady['cost_usd'])} per request ({steady['cache_read_tokens']:,} read)")
    if not figures["fits_window"]:
        print(f"refused: above half of the {args.context_window:,}-token window; the request builder sends the budgeted layout instead")
    return 0


def _dollars(value: float | None) -> str:
    return "no price" if value is None else f"${value:.5f}"


def cmd_announce_table(args: argparse.Namespace) -> int:
    """Every layout at every size, catalogs grown from the shared toolsets as `bench` grows them."""
    folder = Path(args.toolsets) if args.toolsets else toolsets_dir()
    try:
        base = source_tools(folder)
    except FileNotFoundError as exc:
        raise BadInput(str(exc)) from None
    rows = []
    for size in args.sizes:
        catalog = scaled_catalog(base, size)
        for layout in ("flat", "grouped", "budgeted"):
            try:
                rows.append(announcement_figures(catalog, layout, budget=args.budget, context_window=args.context_window,
                                                 prices=price_table(args.prices or ""), model=args.model))
            except (ValueError, PriceTableError) as exc:
                raise BadInput(str(exc)) from None
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"first turn with the default loaded tools; tokens estimated as characters ÷ 2.5; window {args.context_window:,}")
    print(f"{'tools':>8}  {'layout':<9} {'announcement':>12} {'first turn':>10} {'% window':>8} {'all tools':>10} {'saved':>7}"
          f" {'$/turn cached':>13} {'all tools':>10}  fits")
    for row in rows:
        share = 100 * row["first_turn_tool_tokens"] / args.context_window
        steady, baseline = row["cache"]["request"]["steady"]["cost_usd"], row["cache"]["all_tools"]["steady"]["cost_usd"]
        print(f"{row['tools']:>8,}  {row['style']:<9} {row['announcement_tokens']:>12,} {row['first_turn_tool_tokens']:>10,} "
              f"{share:>7.1f}% {row['all_tools_tokens']:>10,} {row['saved_share']:>7.1%} {_dollars(steady):>13} {_dollars(baseline):>10}"
              f"  {'yes' if row['fits_window'] else 'REFUSED'}")
    print("$/turn cached: the steady state, the request's prefix read from the prompt cache (every tool in full: the same, cached)")
    return 0


# The wire styles `request` prints (every registered one, vendor first): the AgentSettings fields each one sets.
REQUEST_WIRE_STYLES: dict[str, dict[str, str]] = {style.command_name: style.default_settings() for style in wire_styles()}
FIRST_USER_MESSAGE = "hello"


def discovered_history(names: Sequence[str], settings: AgentSettings, catalog: ToolCatalog) -> list[dict]:
    """A first user message and one `select:` search that loaded `names`, leaving the history the
    wire style itself leaves (`WireStyle.discovery_messages`: our ToolSearch answered as the loop
    answers it, or the vendor's own search items)."""
    history: list[dict] = [{"role": "user", "content": FIRST_USER_MESSAGE}]
    if not names:
        return history
    style = wire_style(settings.wire)
    arguments = {"query": f"select:{','.join(names)}"}
    result = run_tool_search(arguments, catalog, get_backend("default"), default_max_results=max(len(names), 1))
    return history + style.discovery_messages(f"{style.search_call_prefix}cli_search", arguments, result,
                                              definitions=catalog.get, server_search=settings.server_search)


def cmd_request(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    discovered = [n.strip() for n in (args.discovered or "").split(",") if n.strip()]
    for name in discovered:
        if name not in catalog:
            raise BadInput(f"--discovered: {name!r} is not in {args.catalog}")
        if not catalog.is_deferred(name):
            raise BadInput(f"--discovered: {name!r} is not deferred (it is sent in full anyway)")
    fields = dict(REQUEST_WIRE_STYLES[args.wire])
    if "server_search" in fields:
        fields["server_search"] = args.server_search
    settings = AgentSettings(mode=args.mode, announcement_layout=args.layout, model=args.model or default_model(args.wire),
                             **fields)
    history = discovered_history(discovered, settings, catalog)
    if args.message:  # the person's message in place of the opening one (the tool-changes style ranks it)
        history = [*history[:-1], {"role": "user", "content": args.message}] if len(history) == 1 else \
            [*history, {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
             {"role": "user", "content": args.message}]
    state = ConversationState(history)
    counter = CharEstimateCounter()
    turn = plan_turn(catalog, PermissionPolicy(), settings, state, token_counter=counter, backend=get_backend("default"))
    body = turn.wire_request()
    announcement = turn.wire_announcement.text if turn.wire_announcement else ""
    figures = {"wire": args.wire, "request": body, "tool_tokens": tool_tokens(body, counter, announcement=announcement)}
    changes = turn.tool_changes
    if changes is not None:  # the harness's prediction, as the loop's event shows it
        figures["tool_changes"] = {"added": list(changes.added), "removed": list(changes.removed),
                                   "below_threshold": list(changes.below_threshold), "notes": changes.notes,
                                   "prediction": changes.prediction.to_dict() if changes.prediction else None}
    text = json.dumps(figures, ensure_ascii=False, indent=None if args.json else 2, default=str)
    if args.json:
        print(text)
        return 0
    print(f"{args.wire}: {len(body.get('tools', []))} tool entries, about {figures['tool_tokens']:,} tool tokens "
          f"(what the model sees of the tools, and the announcement; {counter.source})")
    print(text)
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    if args.export:
        return _cost_of_export(args)
    if not (args.catalog and args.wire):
        raise BadInput("cost needs --catalog and --wire (a simulated conversation) or --export (one that ran)")
    catalog = load_catalog(args.catalog)
    try:
        table = price_table(args.prices or "")
        report = conversation_cost(catalog, args.wire, turns=args.turns, discover=args.discover, ttl=args.ttl,
                                   model=args.model, table=table, seconds_between_turns=args.gap)
    except (ValueError, PriceTableError) as exc:
        raise BadInput(str(exc)) from None
    figures = report.figures
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"{args.wire}: {args.turns} turns {args.gap:g} s apart discovering {args.discover} tools, "
          f"{args.model or default_model(args.wire)}, cache TTL {args.ttl} "
          f"(input tokens only; estimated as characters ÷ 2.5)")
    _print_cost_turns(figures["turns"], report.reasons)
    print(f"total ${figures['total_cost_usd']:.5f}; every tool in full: ${figures['all_tools_cached_total_cost_usd']:.5f} cached, "
          f"${figures['all_tools_uncached_total_cost_usd']:.5f} uncached")
    return 0


def _print_cost_turns(turns: list[dict], reasons: list[str | None]) -> None:
    """The per-turn table of `cost`, simulated or replayed from an export (one layout for both)."""
    print(f"{'turn':>4} {'input':>9} {'written':>9} {'read':>9} {'uncached':>9} {'cost $':>10}  prefix break")
    for row, reason in zip(turns, reasons, strict=True):
        cost = "no price" if row["cost_usd"] is None else f"{row['cost_usd']:.5f}"
        print(f"{row['turn']:>4} {row['input_tokens']:>9,} {row['cache_write_tokens']:>9,} {row['cache_read_tokens']:>9,} "
              f"{row['uncached_tokens']:>9,} {cost:>10}  {reason or '-'}")


def _cost_of_export(args: argparse.Namespace) -> int:
    """The figures of a conversation that ran, from its export: what its page's strips and header show."""
    try:
        export = json.loads(Path(args.export).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"could not read {args.export}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{args.export} is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(export, dict) or not isinstance(export.get("events"), list):
        raise BadInput(f"{args.export} is not a conversation export (/conversations/<id>/export.json)")
    try:
        report = recorded_cost(export, price_table(args.prices or ""))
    except (ValueError, PriceTableError) as exc:
        raise BadInput(str(exc)) from None
    figures = report.figures
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"conversation {figures['conversation']}: {len(figures['turns'])} requests as recorded (input tokens only; "
          "estimated as characters ÷ 2.5)")
    _print_cost_turns(figures["turns"], report.reasons)
    total = figures["total_cost_usd"]
    print("total " + ("no price for a model in the price table" if total is None else f"${total:.5f}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground.toolsearch", description="ToolSearch engine: search a catalog, evaluate a backend, benchmark the scorer.")
    commands = parser.add_subparsers(dest="command", required=True)

    search = commands.add_parser("search", help="rank a catalog for one query, with the score breakdown")
    search.add_argument("query")
    search.add_argument("--catalog", required=True, help="JSONL, Anthropic tools array, MCP tools/list result or OpenAI tools list")
    search.add_argument("--backend", default="default", help="backend name (default = the configured default) or dotted path")
    search.add_argument("--max-results", type=_positive, default=5)
    search.add_argument("--json", action="store_true")
    search.set_defaults(handler=cmd_search)

    evaluation = commands.add_parser("eval", help="recall@k, recall@10, full-hit@k, MRR and latency over a labelled query set")
    evaluation.add_argument("--catalog")
    evaluation.add_argument("--queries")
    evaluation.add_argument("--backend", default="default")
    evaluation.add_argument("--k", type=_positive, default=5)
    evaluation.add_argument("--json", action="store_true")
    # The search-quality suite: shared toolsets × backends × query styles on a fixed split.
    evaluation.add_argument("--toolsets", help="shared toolset names, comma-separated, or 'all' (instead of --catalog/--queries)")
    evaluation.add_argument("--backends", help="comma-separated backends for --toolsets (default: --backend); NAME:option=value[:option=value] runs a backend with other settings, e.g. hybrid,hybrid:aspect_weight=0")
    evaluation.add_argument("--style", choices=["natural", "keyword", "both"], default="natural", help="query style; keyword = derived by text.keyword_query")
    evaluation.add_argument("--split", choices=["test", "dev", "all"], default="test", help="with --toolsets: dev = sha1(id) bucket < 3 of 10 (tuning), test = the rest")
    evaluation.add_argument("--limit", type=_positive, help="with --toolsets: evenly sample this many queries of the split per toolset")
    evaluation.add_argument("--toolsets-dir", help="folder holding the shared toolsets (default: $TOOLSETS_DIR or ../shared/toolsets)")
    evaluation.add_argument("--progress", action="store_true", help="with --toolsets: progress lines on stderr")
    evaluation.add_argument("--usage-from", choices=["none", "dev"], default="none",
                            help="with --toolsets and --split test: use the dev split's queries as a log of past searches (learning from usage; reported as '+usage', not zero-shot)")
    evaluation.add_argument("--learn-from", choices=list(learning_eval.LEARN_SOURCES), default="none",
                            help="train a learned ranking on each toolset's dev split (default: every shared toolset) and report its test split before and after")
    evaluation.set_defaults(handler=cmd_eval)

    bench = commands.add_parser("bench", help="claude-code vs its plain transcription at 1k/10k/100k tools")
    bench.add_argument("--json", action="store_true", help="rows {tools, style, backend, p50_ms, p95_ms, build_s}")
    bench.add_argument("--details", action="store_true", help="with --json: add queries, mean_ms, index_mb, identical, speedup_p50")
    bench.add_argument("--sizes", type=_sizes, default=[1_000, 10_000, 100_000])
    bench.add_argument("--queries", type=_positive, default=40, help="queries per style (claude-code; naive too below 100k)")
    bench.add_argument("--naive-queries-at-100k", type=_positive, default=8)
    bench.add_argument("--naive-budget", type=float, default=30.0, help="seconds per size and style for the plain transcription (it stops after at least 3 queries)")
    bench.add_argument("--repeat", type=_positive, default=3, help="claude-code: best of N runs per query")
    bench.add_argument("--no-memory", action="store_true", help="skip the tracemalloc index-size measurement")
    bench.add_argument("--toolsets", help="folder holding the shared catalogs (default: $TOOLSETS_DIR or ../shared/toolsets)")
    bench.add_argument("--usage-entries", type=_not_negative, default=0,
                       help="also time the backends that learn from usage with a log of N past searches ('NAME +usage' rows; build s = the index update when the log changes)")
    bench.add_argument("--search-backends", default=",".join(BENCH_BACKENDS), help="retrieval backends to add rows for (comma-separated; '' for none; NAME:option=value for other settings, e.g. hybrid:aspect_weight=0)")
    bench.set_defaults(handler=cmd_bench)

    announce = commands.add_parser("announce", help="a first turn's tokens with one announcement layout (flat, grouped, budgeted)")
    announce.add_argument("--catalog", help="one catalog file (prints one object with --json)")
    announce.add_argument("--sizes", type=_sizes, help="instead of --catalog: grow catalogs of these sizes from the shared toolsets and print every layout")
    announce.add_argument("--toolsets", help="with --sizes: folder holding the shared catalogs (default: $TOOLSETS_DIR or ../shared/toolsets)")
    announce.add_argument("--style", choices=["flat", "grouped", "budgeted"], default="flat", help="the announcement layout")
    announce.add_argument("--budget", type=_not_negative, default=0, help="budgeted layout's token budget (0: 2%% of the window)")
    announce.add_argument("--context-window", type=_positive, default=200_000)
    announce.add_argument("--model", default="", help="model to price the cached figures at (default claude-sonnet-4-5)")
    announce.add_argument("--prices", default=os.environ.get("PRICE_TABLE", ""),
                          help="price table overrides: a JSON object or a JSON file (default: $PRICE_TABLE)")
    announce.add_argument("--json", action="store_true",
                          help='one object: {"style", "tools", "announcement_tokens", "first_turn_tool_tokens", "all_tools_tokens", "saved_share", "fits_window", "cache": {"request"|"all_tools": {"first"|"steady": split and cost}}}')
    announce.set_defaults(handler=cmd_announce)

    request = commands.add_parser("request", help="the request body a wire style sends (Anthropic or OpenAI), and its tool tokens")
    request.add_argument("--catalog", required=True, help="a catalog file (as for search)")
    request.add_argument("--wire", required=True, choices=list(REQUEST_WIRE_STYLES))
    request.add_argument("--discovered", help="tools a ToolSearch has loaded already (comma-separated): a later request")
    request.add_argument("--mode", default="true", help="ENABLE_TOOL_SEARCH: true (default), false, auto, auto:N, auto:Ntokens")
    request.add_argument("--layout", choices=["flat", "grouped", "budgeted"], default="flat", help="the announcement layout")
    request.add_argument("--server-search", choices=list(SERVER_SEARCH_TOOLS), default="bm25", help="anthropic-server's search tool")
    request.add_argument("--model", default="", help="model name in the body (default: claude-sonnet-4-5, or gpt-5.4 for OpenAI styles)")
    request.add_argument("--message", default="", help="the person's message (anthropic-tool-changes ranks it and adds the top tools)")
    request.add_argument("--json", action="store_true",
                         help='one object: {"wire", "request", "tool_tokens", "tool_changes"?: {"added", "removed", "prediction"}}')
    request.set_defaults(handler=cmd_request)

    cost = commands.add_parser("cost", help="an N-turn conversation's input cost in one wire style, with prompt caching, against every tool in full")
    cost.add_argument("--catalog", help="a catalog file (as for search)")
    cost.add_argument("--wire", choices=list(COST_WIRE_STYLES))
    cost.add_argument("--export", help="instead: a conversation export (/conversations/<id>/export.json) whose requests are replayed")
    cost.add_argument("--turns", type=_positive, default=6, help="model requests in the conversation")
    cost.add_argument("--discover", type=_not_negative, default=0, help="deferred tools the conversation's searches load")
    cost.add_argument("--ttl", choices=list(CACHE_TTLS), default=DEFAULT_TTL, help="the cache breakpoints' TTL")
    cost.add_argument("--gap", type=_seconds, default=SECONDS_BETWEEN_TURNS,
                      help="seconds between two requests (a gap above the TTL lets the cache expire)")
    cost.add_argument("--model", default="", help="model to price (the price table's ids or prefixes; default claude-sonnet-4-5, "
                                                  "or gpt-5.4 for OpenAI styles, which needs --prices)")
    cost.add_argument("--prices", default=os.environ.get("PRICE_TABLE", ""),
                      help="price table overrides: a JSON object or a JSON file (default: $PRICE_TABLE, as the pages price)")
    cost.add_argument("--json", action="store_true",
                      help='one object: {"wire", "turns": [{"turn", "input_tokens", "cache_write_tokens", "cache_read_tokens", '
                           '"uncached_tokens", "cost_usd", "prefix_break"}], "total_cost_usd", "all_tools_cached_total_cost_usd", '
                           '"all_tools_uncached_total_cost_usd"}')
    cost.set_defaults(handler=cmd_cost)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (CatalogFormatError, BadInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into head
        return 0

