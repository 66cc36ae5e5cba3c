"""The money module: the one per-model price table, and how a model call's usage is counted and priced.

Task runs (agent evaluation), the conversation page, the cost overview, traces and the cache figures
all price tokens here, so a price is changed in one place. Prices are US dollars per million tokens;
a cache write costs more than plain input (5-minute or 1-hour TTL), a cache read less. Plain Python:
the Django side passes in the overrides its setting names (`PRICE_TABLE`), the command lines do the
same. What else every figure shares is here too, said once: a call's input is its uncached, written
and read tokens together (`Usage.input_total`); a call that names no cache TTL is priced at the
API's default (`priced_ttl`); a call is priced at the model its response names, else its turn's
(`priced_model`), and a call with none is counted unpriced as "(no model)" (`unpriced_name`). A
malformed table has one answer everywhere: the processes refuse to start (settings.py), as the
command lines exit with its message.

Defaults: Anthropic's pricing page (platform.claude.com/docs/en/about-claude/pricing, "Model
pricing": base input, 5m cache writes, 1h cache writes, cache hits and refreshes, output) and each
model's overview page, read on 2026-12-05. Cache multipliers there: write 1.25× (5 min) or 2× (1 h)
the input price, read 0.1× (../shared/reference/prompt-caching.md). Prices change: edit the table
through the setting rather than trusting these past their date.

OpenAI's models (gpt-5.4, the first with tool search, and its mini and nano): OpenAI's pricing page
(developers.openai.com/api/docs/pricing) is not among the project's checked references, so these
are its figures as two secondary pages quote them (benchlm.ai, 2026-04-13; morphllm.com, June 2026),
each row saying so in `source`. OpenAI caches automatically (no breakpoints, no write charge: a
written prefix costs plain input) and bills a cache hit at 0.1× the input price for this family;
standard rates, under 272K tokens of context. Check them and override through the setting.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from playground.engine.wires.vendors import OPENAI, vendor_of_model

PRICES_AS_OF = "2026-12-05"
PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
OPENAI_PRICES_AS_OF = "2026-04-13"
OPENAI_PRICES_SOURCE = ("OpenAI's pricing page as quoted by benchlm.ai/blog/posts/openai-api-pricing (2026-04-13) and "
                        "morphllm.com/openai-api-pricing (June 2026); not read from OpenAI itself")
OVERRIDE_SOURCE = "PRICE_TABLE"
PER_TOKENS = 1_000_000
# How a vendor bills its prompt cache: Anthropic's breakpoints (write 1.25× / 2×, read 0.1×);
# OpenAI's automatic cache (no write charge, read 0.1× for the gpt-5.4 family).
ANTHROPIC_CACHING, OPENAI_CACHING = "anthropic", "openai"
CACHINGS = (ANTHROPIC_CACHING, OPENAI_CACHING)
DEFAULT_TTL, LONG_TTL = "5m", "1h"  # a cache write's TTL: the API's default, and the hour it may ask for
NO_MODEL = "(no model)"  # how a call that names no model is listed among the unpriced


@dataclass(frozen=True)
class Usage:
    """A model call's tokens in the loop's one accounting for both vendors: `uncached` input (what the
    saved usage calls "input"), output, and the cached parts beside the uncached input."""

    uncached: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0

    @classmethod
    def of(cls, usage: Mapping[str, Any] | None) -> Usage:
        """From a saved model_response's `usage` ({"input", "output", "cache_write", "cache_read"});
        a missing, negative or non-numeric count is 0."""
        usage = usage or {}
        return cls(*(_count(usage.get(key)) for key in ("input", "output", "cache_write", "cache_read")))

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.uncached + other.uncached, self.output + other.output, self.cache_write + other.cache_write,
                     self.cache_read + other.cache_read)

    @property
    def input_total(self) -> int:
        """Every input token: uncached + written to the cache + read from it."""
        return self.uncached + self.cache_write + self.cache_read


def priced_ttl(ttl: str | None) -> str:
    """The TTL a cache write is priced at: one hour when the call asked for it, else the default."""
    return LONG_TTL if ttl == LONG_TTL else DEFAULT_TTL


def priced_model(model: str | None, turn_model: str | None = "") -> str:
    """The model a call is priced at: the one its response names, else its turn's (older responses name none)."""
    return str(model or turn_model or "")


def unpriced_name(model: str) -> str:
    return model or NO_MODEL


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per million tokens for one model (or a family of model ids sharing a prefix)."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    as_of: str = PRICES_AS_OF
    source: str = PRICES_SOURCE
    caching: str = ANTHROPIC_CACHING

    @classmethod
    def from_base(cls, input_price: float, output_price: float, *, as_of: str = PRICES_AS_OF, source: str = PRICES_SOURCE,
                  caching: str = ANTHROPIC_CACHING) -> ModelPrice:
        """The vendor's standard cache multipliers on the base input price: Anthropic's (write 1.25×
        for 5 minutes, 2× for an hour, read 0.1×) or OpenAI's (no write charge, read 0.1×)."""
        if caching == OPENAI_CACHING:
            return cls(input=input_price, output=output_price, cache_write_5m=input_price, cache_write_1h=input_price,
                       cache_read=round(input_price * 0.1, 6), as_of=as_of, source=source, caching=caching)
        return cls(input=input_price, output=output_price, cache_write_5m=round(input_price * 1.25, 6),
                   cache_write_1h=round(input_price * 2, 6), cache_read=round(input_price * 0.1, 6), as_of=as_of,
                   source=source, caching=caching)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Keys are model id prefixes: "claude-sonnet-4-5" prices "claude-sonnet-4-5-20250929" too. The
# longest matching key wins, so "claude-opus-4-1" is not priced as "claude-opus-4".
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-5": ModelPrice.from_base(5.0, 25.0),
    "claude-opus-4-8": ModelPrice.from_base(5.0, 25.0),
    "claude-opus-4-7": ModelPrice.from_base(5.0, 25.0),
    "claude-opus-4-6": ModelPrice.from_base(5.0, 25.0),
    "claude-opus-4-5": ModelPrice.from_base(5.0, 25.0),
    "claude-opus-4-1": ModelPrice.from_base(15.0, 75.0),
    "claude-opus-4": ModelPrice.from_base(15.0, 75.0),
    "claude-sonnet-5": ModelPrice.from_base(2.0, 10.0),
    "claude-sonnet-4-6": ModelPrice.from_base(3.0, 15.0),
    "claude-sonnet-4-5": ModelPrice.from_base(3.0, 15.0),
    "claude-sonnet-4": ModelPrice.from_base(3.0, 15.0),
    "claude-haiku-4-5": ModelPrice.from_base(1.0, 5.0),
    "claude-3-5-haiku": ModelPrice.from_base(0.8, 4.0),
    "claude-haiku-3-5": ModelPrice.from_base(0.8, 4.0),
    # OpenAI (see the module's note on the source: secondary quotes of OpenAI's page, dated).
    **{model: ModelPrice.from_base(input_price, output_price, as_of=OPENAI_PRICES_AS_OF, source=OPENAI_PRICES_SOURCE,
                                   caching=OPENAI_CACHING)
       for model, input_price, output_price in (("gpt-5.4", 2.5, 15.0), ("gpt-5.4-mini", 0.75, 4.5), ("gpt-5.4-nano", 0.2, 1.25))},
}
FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


class PriceTableError(ValueError):
    """An override that is not a price table; the message says what is wrong."""


class PriceTable:
    """Model prices with overrides; `price(model)` finds the longest matching prefix."""

    def __init__(self, prices: dict[str, ModelPrice] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    def price(self, model: str) -> ModelPrice | None:
        model = (model or "").strip().lower()
        best = ""
        for key in self.prices:
            if model.startswith(key.lower()) and len(key) > len(best):
                best = key
        return self.prices.get(best) if best else None

    def cost_usd(self, model: str, input_tokens: int, output_tokens: int, cache_write: int = 0, cache_read: int = 0,
                 *, ttl: str = DEFAULT_TTL) -> float | None:
        """Dollars for one call (or a sum of calls of one model); None when the model has no price.

        `input_tokens` is the uncached input (what the API reports as `input_tokens`), `cache_write`
        and `cache_read` the cached parts it reports beside it.
        """
        price = self.price(model)
        if price is None:
            return None
        write_price = price.cache_write_1h if priced_ttl(ttl) == LONG_TTL else price.cache_write_5m
        dollars = (max(0, input_tokens) * price.input + max(0, output_tokens) * price.output
                   + max(0, cache_write) * write_price + max(0, cache_read) * price.cache_read) / PER_TOKENS
        return round(dollars, 8)

    def call_cost(self, usage: Usage, model: str, ttl: str | None = "") -> float | None:
        """Dollars of one call (or a sum of calls of one model and TTL); None when the model has no price."""
        return self.cost_usd(model, usage.uncached, usage.output, usage.cache_write, usage.cache_read, ttl=priced_ttl(ttl))

    def with_overrides(self, overrides: dict[str, Any]) -> PriceTable:
        return PriceTable({**self.prices, **parse_overrides(overrides)})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: price.to_dict() for name, price in sorted(self.prices.items())}


def parse_overrides(data: Any) -> dict[str, ModelPrice]:
    """{model prefix: {"input": .., "output": .., optional cache fields, "as_of" and "caching"}}.

    A model given only input and output gets its vendor's standard cache multipliers (`caching`:
    "anthropic" or "openai"; by default the model's default row's, else "openai" for a `gpt-`
    model and "anthropic" otherwise); a model already in the defaults keeps its other fields when
    only some are given.
    """
    if not isinstance(data, dict):
        raise PriceTableError("the price table must be a JSON object: {model: {\"input\": dollars, \"output\": dollars, ...}}")
    parsed: dict[str, ModelPrice] = {}
    for model, fields in data.items():
        if not isinstance(model, str) or not model.strip():
            raise PriceTableError("every model key must be a non-empty string")
        if not isinstance(fields, dict):
            raise PriceTableError(f"{model}: give an object of prices per million tokens")
        unknown = set(fields) - {*FIELDS, "as_of", "caching"}
        if unknown:
            raise PriceTableError(f"{model}: unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(FIELDS)}, as_of, caching")
        values: dict[str, float] = {}
        for name in FIELDS:
            if name not in fields:
                continue
            value = fields[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PriceTableError(f"{model}.{name}: a price is a non-negative number of dollars per million tokens")
            values[name] = float(value)
        as_of = str(fields.get("as_of") or "override")
        base = DEFAULT_PRICES.get(model)
        caching = fields.get("caching") or (base.caching if base else OPENAI_CACHING if vendor_of_model(model) == OPENAI else ANTHROPIC_CACHING)
        if caching not in CACHINGS:
            raise PriceTableError(f"{model}.caching: {caching!r} is not one of {', '.join(CACHINGS)}")
        if base is None:
            if "input" not in values or "output" not in values:
                raise PriceTableError(f"{model}: a model not in the defaults needs at least input and output")
            base = ModelPrice.from_base(values["input"], values["output"], caching=caching)
        elif "input" in values and not any(name in values for name in FIELDS[2:]):
            base = ModelPrice.from_base(values["input"], values.get("output", base.output), caching=caching)
        parsed[model] = replace(base, **values, as_of=as_of, source=OVERRIDE_SOURCE, caching=caching)
    return parsed


def load_overrides(value: str) -> dict[str, Any]:
    """The setting's text: a JSON object, or the path of a JSON file holding one ("" = none)."""
    value = (value or "").strip()
    if not value:
        return {}
    if not value.startswith(("{", "[")):
        try:
            value = Path(value).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise PriceTableError(f"could not read the price table file {value!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"the price table is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    parse_overrides(data)  # checked here, so a bad table fails where it is read
    return data


def price_table(setting: str = "") -> PriceTable:
    """The defaults with the setting's overrides (see `load_overrides`)."""
    return PriceTable().with_overrides(load_overrides(setting))


def cost_usd(model: str, input_tokens: int, output_tokens: int, cache_write: int = 0, cache_read: int = 0, *,
             table: PriceTable | None = None, ttl: str = DEFAULT_TTL) -> float | None:
    """Dollars for the tokens at `model`'s price in `table` (the defaults when none is given)."""
    return (table or PriceTable()).cost_usd(model, input_tokens, output_tokens, cache_write, cache_read, ttl=ttl)
