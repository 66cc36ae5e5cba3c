"""The price table this deployment uses: the engine's dated defaults with the `PRICE_TABLE` setting's
overrides (playground/engine/pricing.py, the money module). Every page and task that shows dollars
asks here. A malformed setting never reaches them: settings.py refuses to start with its message, in
every process alike (web, worker, beat, management commands)."""
from __future__ import annotations

import functools

from django.conf import settings

from playground.engine.pricing import PriceTable, PriceTableError, price_table

__all__ = ["PriceTableError", "current_price_table"]


@functools.lru_cache(maxsize=4)
def _table_for(setting: str) -> PriceTable:
    return price_table(setting)


def current_price_table() -> PriceTable:
    """The table (checked at start; PriceTableError, with a clear message, only for a setting changed
    since, as a test may)."""
    return _table_for(getattr(settings, "PRICE_TABLE", "") or "")
