"""The price table this deployment uses: the engine's dated defaults with the `PRICE_TABLE` setting's
overrides (playground/engine/pricing.py). Every page and task that shows dollars asks here."""
from __future__ import annotations

import functools

from django.conf import settings

from playground.engine.pricing import PriceTable, PriceTableError, price_table

__all__ = ["PriceTableError", "current_price_table"]


@functools.lru_cache(maxsize=4)
def _table_for(setting: str) -> PriceTable:
    return price_table(setting)


def current_price_table() -> PriceTable:
    """The table (raises PriceTableError, with a clear message, when the setting is malformed)."""
    return _table_for(getattr(settings, "PRICE_TABLE", "") or "")
