"""The cost command: an N-turn conversation's cache-priced input cost per wire style (demo catalog)."""
from __future__ import annotations

import json

import pytest

from playground.engine.cache_cost import COST_WIRE_STYLES, conversation_cost, discovery_schedule
from playground.engine.catalog_io import load_catalog
from playground.engine.pricing import PriceTable
from playground.toolsearch.cli import main

from .conftest import REPO_ROOT

DEMO = REPO_ROOT / "playground" / "registry" / "demo_data" / "catalog.jsonl"
# An illustrative OpenAI price (the default table prices Anthropic's models only): dollars per million tokens.
OPENAI_PRICES = {"gpt-5.4": {"input": 1.25, "output": 10, "cache_read": 0.125}}
TURN_KEYS = ["turn", "input_tokens", "cache_write_tokens", "cache_read_tokens", "uncached_tokens", "cost_usd", "prefix_break"]


@pytest.fixture(scope="module")
def demo():
    return load_catalog(DEMO)


def run_json(capsys, *args: str) -> dict:
    assert main(["cost", "--catalog", str(DEMO), *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("wire", list(COST_WIRE_STYLES))
def test_the_cost_command_prints_the_issues_shape_for_every_style(capsys, wire):
    figures = run_json(capsys, "--wire", wire, "--turns", "4", "--discover", "2", "--prices", json.dumps(OPENAI_PRICES))
    assert list(figures) == ["wire", "turns", "total_cost_usd", "all_tools_cached_total_cost_usd", "all_tools_uncached_total_cost_usd"]
    assert figures["wire"] == wire
    assert [row["turn"] for row in figures["turns"]] == [1, 2, 3, 4]
    table = PriceTable().with_overrides(OPENAI_PRICES)
    model = "gpt-5.4" if wire.startswith("openai-") else "claude-sonnet-4-5"
    for row in figures["turns"]:
        assert list(row) == TURN_KEYS
        assert row["input_tokens"] == row["uncached_tokens"] + row["cache_write_tokens"] + row["cache_read_tokens"]
        assert row["cost_usd"] == table.cost_usd(model, row["uncached_tokens"], 0, row["cache_write_tokens"], row["cache_read_tokens"])
    assert figures["turns"][-1]["cache_read_tokens"] > 0  # no discovery in the last turn: every style reads
    assert figures["total_cost_usd"] == pytest.approx(sum(row["cost_usd"] for row in figures["turns"]))
    assert figures["all_tools_cached_total_cost_usd"] < figures["all_tools_uncached_total_cost_usd"]


def test_the_native_style_never_breaks_the_prefix_and_the_client_style_does_on_every_discovery(demo):
    native = conversation_cost(demo, "anthropic-native", turns=6, discover=3)
    client = conversation_cost(demo, "anthropic-client", turns=6, discover=3)
    server = conversation_cost(demo, "anthropic-server", turns=6, discover=3)
    assert [row["prefix_break"] for row in native.figures["turns"]] == [None] * 6
    assert [row["prefix_break"] for row in server.figures["turns"]] == [None] * 6
    assert [row["prefix_break"] for row in client.figures["turns"]] == [None, "tools", "tools", "tools", None, None]
    first_found = next(tool.name for tool in demo.deferred)
    assert client.reasons[1] == f"tools array changed: {first_found} discovered"
    # after turn 1 the native style reads (almost) everything; the client style writes it all again
    for row in native.figures["turns"][1:]:
        assert row["cache_read_tokens"] > 0.9 * row["input_tokens"]
    for row in client.figures["turns"][1:4]:
        assert row["cache_read_tokens"] < 0.5 * row["input_tokens"]
    assert native.figures["total_cost_usd"] < client.figures["total_cost_usd"]


@pytest.mark.parametrize(("wire", "breaks"), [("openai-hosted", False), ("openai-client", False), ("openai-functions", True)])
def test_openai_styles_loading_tools_in_the_input_keep_the_prefix_and_the_functions_list_breaks_it(demo, wire, breaks):
    report = conversation_cost(demo, wire, turns=5, discover=2, table=PriceTable().with_overrides(OPENAI_PRICES))
    rows = report.figures["turns"]
    assert [row["prefix_break"] for row in rows] == ([None, "tools", "tools", None, None] if breaks else [None] * 5)
    assert all(row["cache_write_tokens"] == 0 for row in rows)  # OpenAI bills no writes
    assert (rows[1]["cache_read_tokens"] == 0) is breaks


def test_a_model_the_table_does_not_price_is_a_clear_error(capsys):
    assert main(["cost", "--catalog", str(DEMO), "--wire", "openai-hosted", "--model", "gpt-test", "--prices", ""]) == 2
    assert "no price for model 'gpt-test'" in capsys.readouterr().err


def test_the_all_tools_baseline_uncached_prices_every_input_token_at_the_base_price(demo):
    report = conversation_cost(demo, "all-tools", turns=3, discover=1)
    rows = report.figures["turns"]
    assert report.figures["total_cost_usd"] == report.figures["all_tools_cached_total_cost_usd"]
    price = PriceTable().price("claude-sonnet-4-5")
    assert report.figures["all_tools_uncached_total_cost_usd"] == pytest.approx(
        sum(row["input_tokens"] for row in rows) * price.input / 1_000_000)


@pytest.mark.parametrize(("ttl", "reads"), [("5m", False), ("1h", True)])
def test_a_gap_longer_than_the_ttl_lets_the_cache_expire(capsys, ttl, reads):
    figures = run_json(capsys, "--wire", "anthropic-native", "--turns", "3", "--discover", "1", "--gap", "600", "--ttl", ttl)
    assert all((row["cache_read_tokens"] > 0) is reads for row in figures["turns"][1:])
    assert figures["turns"][0]["cache_read_tokens"] == 0


def test_discoveries_are_spread_over_the_replies_a_later_turn_reads():
    assert discovery_schedule(["a", "b", "c"], 3) == [["a", "c"], ["b"], []]
    assert discovery_schedule(["a"], 1) == [[]]


@pytest.mark.parametrize(("args", "message"), [
    (["--wire", "anthropic-native", "--discover", "100000"], "deferred tools"),
    (["--wire", "anthropic-native", "--model", "no-such-model"], "no price"),
    (["--wire", "anthropic-native", "--prices", "{not json"], "not valid JSON"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, args, message):
    assert main(["cost", "--catalog", str(DEMO), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
