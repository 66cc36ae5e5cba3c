"""Which offered choices cannot work in this deployment, and why (with the fix).

Forms show such choices disabled with the reason, and refuse them (a disabled option can still be
posted), so a conversation or evaluation never starts only to fail at run time: the Anthropic
provider without ANTHROPIC_API_KEY, the `server` wire style on a provider that cannot run it, the
`postgres` search backend without PostgreSQL.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.utils.module_loading import import_string

from playground.engine.search.backends import parse_backend_spec
from playground.engine.search.postgres import PostgresSearchBackend, default_dsn
from playground.engine.wires.registry import profile_styles
from playground.registry import ports


def _provider_class(key: str) -> Any:
    """The provider class from the conversations app (handed in through ports), or None if unknown."""
    try:
        return ports.providers().provider_class(key)
    except Exception:  # noqa: BLE001 - an unknown key, an import that failed, or no providers registered yet
        return None


def provider_unavailable(key: str) -> str:
    if not key:
        return ""  # automatic: Claude with a key, else the demo agent, which always runs
    cls = _provider_class(key)
    if cls is None:
        return f"unknown provider {key!r}"
    return cls.unavailable_reason() if hasattr(cls, "unavailable_reason") else ""


def wire_style_unavailable(wire_style: str, provider_key: str) -> str:
    """Why `provider_key` (already resolved: not automatic) cannot run `wire_style`."""
    cls = _provider_class(provider_key)
    if cls is None or not wire_style or wire_style in cls.wire_styles:
        return ""
    able = [label for key, label in ports.providers().provider_choices()
            if key and wire_style in getattr(_provider_class(key), "wire_styles", ())]
    return f"the {wire_style} wire style needs the {' or '.join(able) or 'another'} provider; {cls.label} cannot run it"


def server_style_unavailable() -> str:
    """Why no provider that can be used here runs Anthropic's server-side search ("" when one can)."""
    server = next(style.name for style in profile_styles() if style.server_search_variants)
    for key, label in ports.providers().provider_choices():
        if key and server in getattr(_provider_class(key), "wire_styles", ()):
            reason = provider_unavailable(key)
            if not reason:
                return ""
            return f"needs the {label} provider ({reason})"
    return "no provider here runs it"


def backend_unavailable(spec: str) -> str:
    """Why the search backend `spec` (a name, maybe with settings; "" = the default) cannot run here."""
    name, options = parse_backend_spec(spec or settings.TOOLSEARCH_DEFAULT_BACKEND)
    target = settings.TOOLSEARCH_BACKENDS.get(name)
    try:
        cls = import_string(target) if isinstance(target, str) else target
    except ImportError:
        return ""
    if isinstance(cls, type) and issubclass(cls, PostgresSearchBackend) and not options.get("dsn"):
        try:
            default_dsn()
        except ValueError:
            return "needs PostgreSQL: set TOOLSEARCH_PG_DSN or run on a PostgreSQL DATABASE_URL"
    return ""


class ReasonsMixin:
    """A choice widget that shows unusable choices disabled, the reason after the label.

    `reasons`: value → why it cannot be chosen. `keep`: values labelled with the reason but left
    selectable (the profile form: a profile also feeds "what the model sees", and a disabled selected
    option would not be submitted, so saving would silently change it).
    """

    def __init__(self, *args: Any, reasons: dict[str, str] | None = None, keep: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reasons = dict(reasons or {})
        self.keep = tuple(keep)

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex=subindex, attrs=attrs)
        reason = self.reasons.get(str(value), "")
        if reason:
            option["label"] = f"{label} — unavailable: {reason}"
            if str(value) not in self.keep:
                option["attrs"]["disabled"] = True
                option["attrs"]["data-unavailable"] = reason
        return option


class ReasonSelect(ReasonsMixin, forms.Select):
    pass


class ReasonCheckboxes(ReasonsMixin, forms.CheckboxSelectMultiple):
    pass


def mark_unavailable(field: forms.ChoiceField, reasons: dict[str, str], keep: tuple[str, ...] = (), widget: type = ReasonSelect) -> None:
    """Give `field` a widget that disables the choices in `reasons` (only those with a reason)."""
    reasons = {k: v for k, v in reasons.items() if v}
    old = field.widget
    field.widget = widget(attrs=old.attrs, reasons=reasons, keep=keep)
    field.widget.choices = field.choices
