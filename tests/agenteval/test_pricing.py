"""The one price table: dated defaults, prefix lookup, cache prices, overrides from the setting."""
from __future__ import annotations

import json

import pytest

from playground.engine import pricing
from playground.engine.pricing import PriceTable, PriceTableError, cost_usd, load_overrides, price_table


def test_known_models_are_priced_per_million_tokens_with_cache_multipliers():
    # Sonnet 4.5: $3 input, $15 output, writes 1.25x / 2x, reads 0.1x (pricing page, dated in the module).
    assert cost_usd("claude-sonnet-4-5", 1_000_000, 0) == pytest.approx(3.0)
    assert cost_usd("claude-sonnet-4-5", 0, 1_000_000) == pytest.approx(15.0)
    assert cost_usd("claude-sonnet-4-5", 0, 0, cache_write=1_000_000) == pytest.approx(3.75)
    assert cost_usd("claude-sonnet-4-5", 0, 0, cache_write=1_000_000, ttl="1h") == pytest.approx(6.0)
    assert cost_usd("claude-sonnet-4-5", 0, 0, cache_read=1_000_000) == pytest.approx(0.3)
    # 1,000 in + 200 out on Haiku 4.5 ($1 / $5): 0.001 + 0.001.
    assert cost_usd("claude-haiku-4-5", 1000, 200) == pytest.approx(0.002)
    claude = [p for name, p in pricing.DEFAULT_PRICES.items() if name.startswith("claude")]
    assert pricing.PRICES_AS_OF and all(p.as_of == pricing.PRICES_AS_OF and p.source == pricing.PRICES_SOURCE for p in claude)


def test_openai_models_are_priced_with_their_source_and_automatic_caching():
    # gpt-5.4: $2.50 input, $15 output, a cache hit 0.1x, no write charge (dated, secondary source named).
    price = PriceTable().price("gpt-5.4-2026-03-05")
    assert (price.input, price.output, price.cache_read, price.cache_write_5m) == (2.5, 15.0, 0.25, 2.5)
    assert price.caching == "openai" and price.as_of == pricing.OPENAI_PRICES_AS_OF and "not read from OpenAI" in price.source
    assert PriceTable().price("gpt-5.4-mini").input == 0.75  # the longest prefix, not gpt-5.4's
    # 1,000 uncached + 9,000 cached input and 100 out: 0.0025 + 0.00225 + 0.0015.
    assert cost_usd("gpt-5.4", 1000, 100, cache_read=9000) == pytest.approx(0.00625)


def test_an_openai_override_keeps_openai_caching():
    table = PriceTable().with_overrides({"gpt-5.4": {"input": 3, "output": 18}, "gpt-6": {"input": 4, "output": 20}})
    assert (table.price("gpt-5.4").cache_read, table.price("gpt-5.4").cache_write_5m) == (0.3, 3.0)
    assert table.price("gpt-6").caching == "openai" and table.price("gpt-6").cache_write_1h == 4.0
    assert table.price("gpt-5.4").source == "PRICE_TABLE"
    with pytest.raises(PriceTableError, match="caching"):
        PriceTable().with_overrides({"m": {"input": 1, "output": 2, "caching": "both"}})


def test_the_longest_prefix_wins_and_dated_ids_match():
    table = PriceTable()
    assert table.price("claude-opus-4-1-20250805").input == 15.0
    assert table.price("claude-opus-4-5-20251101").input == 5.0
    assert table.price("claude-sonnet-4-5-20250929").output == 15.0
    assert table.price("gpt-4o") is None
    assert cost_usd("claude-test", 100, 20) is None  # no price: None, never a made-up zero


def test_overrides_change_add_and_keep_the_rest():
    table = price_table(json.dumps({"claude-sonnet-4-5": {"input": 1, "output": 2}, "my-model": {"input": 10, "output": 20, "cache_read": 0}}))
    assert table.price("claude-sonnet-4-5").cache_write_5m == pytest.approx(1.25)  # standard multipliers on the new input
    assert table.cost_usd("my-model", 1_000_000, 1_000_000, cache_read=5) == pytest.approx(30.0)
    assert table.price("claude-haiku-4-5").input == 1.0  # untouched defaults stay
    assert table.price("my-model").as_of == "override"


def test_the_setting_may_name_a_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"claude-haiku-4-5": {"input": 2, "output": 4, "as_of": "2027-01-01"}}))
    table = price_table(str(path))
    assert table.cost_usd("claude-haiku-4-5", 1_000_000, 0) == pytest.approx(2.0)
    assert table.price("claude-haiku-4-5").as_of == "2027-01-01"


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"x": {"input": 1}}', "needs at least input and output"),
    ('{"claude-sonnet-4-5": {"input": -1}}', "non-negative"),
    ('{"claude-sonnet-4-5": {"inptu": 1}}', "unknown field"),
    ("/no/such/prices.json", "could not read"),
])
def test_a_malformed_table_is_a_clear_error(text, message):
    with pytest.raises(PriceTableError, match=message):
        load_overrides(text)


def test_the_deployment_table_reads_the_setting(settings):
    from playground.registry.prices import current_price_table

    settings.PRICE_TABLE = '{"claude-sonnet-4-5": {"input": 9, "output": 9}}'
    assert current_price_table().price("claude-sonnet-4-5").input == 9
    settings.PRICE_TABLE = ""
    assert current_price_table().price("claude-sonnet-4-5").input == 3


def test_a_malformed_table_stops_every_process_at_start_with_its_message():
    # One policy (it used to be the defaults on one page, no price in the loop and the preview, a refusal
    # to start a task run): the settings refuse, so the web server, workers, beat and commands never start.
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'playground.settings'); django.setup(); "
            "from django.conf import settings; print(repr(settings.PRICE_TABLE))")
    root = Path(__file__).resolve().parents[2]

    def start(table: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PRICE_TABLE": table}, cwd=root,
                              capture_output=True, text=True, timeout=60)

    refused = start('{"claude-sonnet-4-5": {"input": -1}}')
    assert refused.returncode != 0
    assert "PRICE_TABLE is malformed: claude-sonnet-4-5.input: a price is a non-negative number" in refused.stderr
    fine = start('{"claude-sonnet-4-5": {"input": 9, "output": 9}}')
    assert fine.returncode == 0, fine.stderr


def test_usage_counts_every_input_token_once_and_prices_at_the_calls_model_and_ttl():
    usage = pricing.Usage.of({"input": 100, "output": 10, "cache_write": 1000, "cache_read": 10_000})
    assert usage.input_total == 11_100 and (usage + usage).input_total == 22_200
    assert pricing.Usage.of({"input": "x", "output": -5, "cache_read": None}) == pricing.Usage()
    table = PriceTable()
    # Sonnet 4.5: 100 × 3 + 10 × 15 + 1,000 × 3.75 (5 minutes, the default) + 10,000 × 0.30, per million.
    assert table.call_cost(usage, "claude-sonnet-4-5", "") == pytest.approx((300 + 150 + 3750 + 3000) / 1e6)
    assert table.call_cost(usage, "claude-sonnet-4-5", "1h") == pytest.approx((300 + 150 + 6000 + 3000) / 1e6)
    assert (pricing.priced_ttl(""), pricing.priced_ttl(None), pricing.priced_ttl("1h")) == ("5m", "5m", "1h")
    assert pricing.priced_model("", "claude-haiku-4-5") == "claude-haiku-4-5" == pricing.priced_model("claude-haiku-4-5", "x")
    assert pricing.unpriced_name("") == "(no model)" and table.call_cost(usage, "no-such-model") is None
