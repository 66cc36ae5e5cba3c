"""Backend settings typed in the inspector (or on a profile): which options a backend accepts there,
and the checks that turn the typed text into a backend spec.

Anyone logged in can type inspector settings: only options a backend declares (`option_names`),
and none that name a file or a model. A backend that declares none (claude-code, postgres, whose
`dsn` and `table` reach a database) takes no settings there.
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from playground.engine.search.backends import parse_backend_spec
from playground.engine.search.base import SearchBackend, backend_class
from playground.registry import backends

INSPECTOR_REFUSED_OPTIONS = frozenset({"encoder", "cache", "semantic"})
INSPECTOR_SETTINGS_MAX_CHARS = 300


def tuned_backend_spec(name: str, settings_text: str) -> str:
    """`name` with inspector settings (`aspect_weight=0:intent_weight=0.5`) as one backend spec.

    Raises ValueError, with a message for the page, for text that is not key=value pairs, an
    option the backend does not declare, the options that name files or models, and a value that
    is not a number, true/false, a short word or an object of those (`field_weights={"name": 2}`,
    `bm25={"k1": 1.5}`). A value of the wrong type for its option is caught when the backend is
    made (`checked_backend_spec`).
    """
    text = settings_text.strip()
    if not text:
        return name
    if len(text) > INSPECTOR_SETTINGS_MAX_CHARS:
        raise ValueError(f"settings are limited to {INSPECTOR_SETTINGS_MAX_CHARS} characters")
    base = name if name and name != "default" else settings.TOOLSEARCH_DEFAULT_BACKEND
    spec = f"{base}:{text}"
    base_name, options = parse_backend_spec(spec)
    allowed = _inspector_options(backend_class(base_name, dict(settings.TOOLSEARCH_BACKENDS)))
    if not allowed:
        raise ValueError(f"backend {base_name!r} takes no settings in the inspector")
    for key in options:
        if key not in allowed and key not in INSPECTOR_REFUSED_OPTIONS:
            raise ValueError(f"unknown option {key!r} for backend {base_name!r} (settings: {', '.join(sorted(allowed))})")
    _check_inspector_options(options)
    return spec


def checked_backend_spec(name: str, settings_text: str) -> str:
    """`tuned_backend_spec`, with the backend made once, so that a value of the wrong type is an
    error where the settings are typed (a form), not later in a run or a conversation."""
    spec = tuned_backend_spec(name, settings_text)
    if spec != name:
        backends.make_backend(spec)
    return spec


def tuned_search_backend(name: str, settings_text: str) -> SearchBackend:
    """The backend `name` with inspector settings (the plain one when there are none); raises
    ValueError as `tuned_backend_spec` does."""
    if not settings_text.strip():
        return backends.search_backend(name)
    return backends.tuned_search_backend(tuned_backend_spec(name, settings_text))


def backend_option_names(backend: SearchBackend) -> list[str]:
    """The settings the inspector accepts for this backend (empty: it has none)."""
    return sorted(_inspector_options(type(getattr(backend, "inner", backend))))


def _inspector_options(cls: type[SearchBackend]) -> frozenset[str]:
    return frozenset(cls.option_names or ()) - INSPECTOR_REFUSED_OPTIONS


def _check_inspector_options(options: dict[str, Any], depth: int = 0) -> None:
    for key, value in options.items():
        if key in INSPECTOR_REFUSED_OPTIONS:
            raise ValueError(f"option {key!r} cannot be set in the inspector (it names a file or a model); "
                             "set it in TOOLSEARCH_DEFAULT_BACKEND or on the CLI")
        if isinstance(value, dict) and depth == 0:
            _check_inspector_options(value, depth + 1)
        elif not (isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 40)):
            raise ValueError(f"option {key}: give a number, true/false or a short word, not {json.dumps(value)}")
