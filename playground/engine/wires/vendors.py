"""The vendors the wire styles belong to, and which vendor a model id names (by its prefix).

A leaf module (it imports nothing of the engine), so the price table can ask a model's vendor
without importing the wire styles, which price their caches through it.
"""
from __future__ import annotations

ANTHROPIC, OPENAI = "anthropic", "openai"
VENDORS: tuple[str, ...] = (ANTHROPIC, OPENAI)
VENDOR_LABELS: dict[str, str] = {ANTHROPIC: "Claude", OPENAI: "OpenAI"}
# A model id's vendor by its prefix (pricing picks a caching scheme by it; an OpenAI provider handed
# a Claude model name uses its own default model).
VENDOR_MODEL_PREFIXES: dict[str, tuple[str, ...]] = {ANTHROPIC: ("claude",), OPENAI: ("gpt-",)}


def vendor_of_model(model: str) -> str:
    """The vendor a model id belongs to by its prefix, or "" for one neither names."""
    model = (model or "").strip().lower()
    return next((vendor for vendor, prefixes in VENDOR_MODEL_PREFIXES.items() if model.startswith(prefixes)), "")
