"""Dollars as pages show them: `{{ value|usd }}` ("$0.0123", "$1.24", "—" when unpriced)."""
from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def usd(value) -> str:
    if value is None or value == "":
        return "—"
    amount = float(value)
    if amount == 0:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    if abs(amount) >= 0.01:
        return f"${amount:.4f}"
    return f"${amount:.6f}"


@register.filter
def get_cell(mapping, key):
    """`{{ totals|get_cell:profile_id }}`: a dict's value by a key a template cannot spell (None, an int)."""
    return mapping.get(key)
