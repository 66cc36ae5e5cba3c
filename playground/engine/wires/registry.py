"""The one registry of wire styles: every table that maps a style's name to something reads it here.

`WIRE_STYLE_CLASSES` lists each style by the dotted path of its `base.WireStyle` subclass (django-
debug-toolbar's way with panels), in the order menus show them; a style is imported the first time
it is asked for. Adding a style is one module under `wires/` and one line here
(docs/architecture.md#wire-styles walks through one).

The vendors' facts the styles share (which vendor a model id names, what pages call a vendor) are
`vendors.py`, a leaf module the price table reads too.
"""
from __future__ import annotations

import importlib
from dataclasses import replace
from functools import cache
from typing import Any

from playground.engine.wires.base import WireStyle
from playground.engine.wires.vendors import ANTHROPIC, vendor_of_model

WIRE_STYLE_CLASSES: tuple[str, ...] = (
    "playground.engine.wires.anthropic_native.AnthropicNative",
    "playground.engine.wires.anthropic_client.AnthropicClient",
    "playground.engine.wires.anthropic_server.AnthropicServerSearch",
    "playground.engine.wires.anthropic_tool_changes.AnthropicToolChanges",
    "playground.engine.wires.openai_hosted.OpenAIHosted",
    "playground.engine.wires.openai_client.OpenAIClient",
    "playground.engine.wires.openai_functions.OpenAIFunctions",
)


def _import_style(path: str) -> WireStyle:
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, WireStyle)):
        raise TypeError(f"{path} is not a WireStyle subclass")
    return cls()


@cache
def _styles() -> dict[str, WireStyle]:
    styles: dict[str, WireStyle] = {}
    for path in WIRE_STYLE_CLASSES:
        style = _import_style(path)
        if style.name in styles:
            raise ValueError(f"two wire styles are named {style.name!r}")
        styles[style.name] = style
    return styles


def wire_styles() -> tuple[WireStyle, ...]:
    """Every style, in the registry's order."""
    return tuple(_styles().values())


def wire_names() -> tuple[str, ...]:
    return tuple(_styles())


def wire_style(name: str) -> WireStyle:
    """The style named `name`; ValueError (with the names) for an unknown one."""
    try:
        return _styles()[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown wire style {name!r} (expected one of {', '.join(_styles())})") from None


def by_command_name(command_name: str) -> WireStyle:
    """The style `toolsearch request|cost --wire` and compare's menu name (vendor first: anthropic-native)."""
    for style in wire_styles():
        if style.command_name == command_name:
            return style
    raise ValueError(f"unknown wire style {command_name!r} (expected one of {', '.join(command_names())})")


def command_names() -> tuple[str, ...]:
    return tuple(style.command_name for style in wire_styles())


def profile_styles() -> tuple[WireStyle, ...]:
    """The styles a profile may store (AgentProfile.wire_style's choices), each played on either vendor."""
    return tuple(style for style in wire_styles() if style.profile_choice)


def profile_style_of(name: str) -> str:
    """The profile style a style stands for (its own name for a profile style)."""
    style = wire_style(name)
    return style.stands_for or style.name


def counterpart(name: str, vendor: str) -> WireStyle:
    """The style of `vendor` that plays the same profile style as `name` (who searches, what answers):
    the profile's "native" on OpenAI's wire is `openai-client`, its "server" `openai-hosted`."""
    wanted = profile_style_of(name)
    for style in wire_styles():
        if style.vendor == vendor and (style.stands_for or style.name) == wanted:
            return style
    raise ValueError(f"no {vendor} wire style plays the {wanted!r} profile style")


def settings_for_vendor(settings: Any, vendor: str, default_model: str = "") -> Any:
    """A profile's engine settings (`requests.AgentSettings`) as `vendor`'s model gets them: its wire
    style as that vendor's counterpart (`counterpart`), with `default_model` where the profile names
    another vendor's model. The base URL (ANTHROPIC_BASE_URL's gateway gate) and the server-side
    search variant belong to Anthropic's wire; on another vendor's they are cleared."""
    style = counterpart(settings.wire, vendor)
    model = settings.model if vendor_of_model(settings.model) in ("", vendor) else (default_model or settings.model)
    variant = (settings.server_search or style.default_settings().get("server_search", "")) if style.server_search_variants else ""
    return replace(settings, wire=style.name, model=model, base_url=settings.base_url if vendor == ANTHROPIC else "",
                   server_search=variant)
