"""Keeping an MCP server's credentials out of pages, status frames, stored errors and logs.

Env and header values are never shown (`SECRET_MASK` everywhere). Credentials also travel in the
URL (`https://user:pass@host/mcp?api_key=…`), in a stdio server's arguments (`--token=…`,
`--api-key X`) and so in error text and a server's stderr. `mask_url` and `mask_args` give the
shown forms; `scrub` replaces every known secret of a server (`known_secrets`) and anything that
looks like one in free text. Apply `scrub` before error text is stored, logged or sent.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

SECRET_MASK = "********"

# Names of flags, query parameters and KEY=value pairs whose values are credentials.
_SECRET_NAME = r"[\w.-]*(?:token|key|secret|passw(?:or)?d|pwd|auth|bearer|credential)[\w.-]*"
SECRET_NAME = re.compile(rf"^-*{_SECRET_NAME}$", re.IGNORECASE)
# Shapes of well-known tokens (provider prefixes) and long random-looking strings.
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16})\b"
)
_LONG_RANDOM = re.compile(r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9_\-+=.]{32,}$")
# Values shorter than this are not treated as secrets in free text (masking "1" or "true" everywhere
# would make every message unreadable and protect nothing).
MIN_SECRET_CHARS = 4

_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
# `--token=abc`, `api_key: abc`, `password=abc` in free text; `--token abc` (a flag and its value).
_NAMED_VALUE_IN_TEXT = re.compile(
    rf"(?i)(?<![\w-])({_SECRET_NAME}(?<!error)(?<!exception)(?<!warning)(?:\s*[=:]\s*)|-+{_SECRET_NAME}(?:\s*[=:]\s*|\s+))([^\s'\",;&]+)"
)
# An Authorization value quoted in text ("Bearer abc123"); the value must hold a digit, so prose
# ("Basic auth failed") stays readable.
_AUTH_SCHEME_IN_TEXT = re.compile(r"\b(Bearer|bearer|Basic|Token)\s+((?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{6,})")


def mask_url(url: str) -> str:
    """The URL with its userinfo and every query value masked (keys and the rest kept)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            netloc = (f"{SECRET_MASK}:{SECRET_MASK}" if ":" in userinfo else SECRET_MASK) + "@" + host
        query = parts.query
        if query:
            query = "&".join(f"{key}={SECRET_MASK}" if sep else key
                             for key, sep, _ in (item.partition("=") for item in query.split("&")))
        fragment = SECRET_MASK if parts.fragment and "=" in parts.fragment else parts.fragment
        return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:  # not parseable as a URL (e.g. a broken IPv6 host): mask all of it after the scheme
        scheme, sep, _ = url.partition("://")
        return f"{scheme}://{SECRET_MASK}" if sep else SECRET_MASK


def _looks_secret(value: str) -> bool:
    return bool(_TOKEN_SHAPES.search(value) or _LONG_RANDOM.match(value))


def mask_args(args: Sequence[str]) -> list[str]:
    """A stdio server's arguments with secret values masked: the values of secret-named flags
    (`--token=X`, `--api-key X`), secret-named `KEY=value` pairs, URL credentials, and values that
    look like tokens (provider prefixes, 32+ random-looking characters)."""
    masked: list[str] = []
    secret_next = False
    for arg in (str(a) for a in args):
        if secret_next and not arg.startswith("-"):
            masked.append(SECRET_MASK)
            secret_next = False
            continue
        secret_next = False
        name, sep, value = arg.partition("=")
        if sep and SECRET_NAME.match(name) and value:
            masked.append(f"{name}={SECRET_MASK}")
        elif arg.startswith("-") and SECRET_NAME.match(arg):
            masked.append(arg)
            secret_next = True
        elif "://" in arg:
            masked.append(mask_url(arg))
        elif _looks_secret(arg):
            masked.append(SECRET_MASK)
        else:
            masked.append(arg)
    return masked


def _secret_arg_values(args: Sequence[str]) -> list[str]:
    values = []
    for arg, shown in zip(args, mask_args(args)):
        arg = str(arg)
        if shown == arg:
            continue
        if "://" in arg:
            values.extend(_url_secrets(arg))
        elif shown.endswith("=" + SECRET_MASK):
            values.append(arg.partition("=")[2])
        else:
            values.append(arg)
    return values


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
        found += [value for _, value in parse_qsl(parts.fragment)]
        raw_userinfo = parts.netloc.rpartition("@")[0]
        found += raw_userinfo.split(":") if raw_userinfo else []  # the percent-encoded forms too
        found += [item.partition("=")[2] for item in parts.query.split("&")]
    except ValueError:
        return []
    return found


def known_secrets(server: Any) -> list[str]:
    """Every secret value of a server (an `McpServer` row or a `ServerConfig`): env and header
    values (and a header's token after its scheme), URL credentials and query values, and the
    values of secret arguments. Longest first, so a secret inside another is replaced with it."""
    values: list[str] = []
    env: Mapping[str, Any] = getattr(server, "env", None) or {}
    headers: Mapping[str, Any] = getattr(server, "headers", None) or {}
    values += [str(v) for v in env.values()]
    for value in (str(v) for v in headers.values()):
        values.append(value)
        values += value.split()[1:]  # "Bearer abc" → also "abc"
    values += _url_secrets(str(getattr(server, "url", "") or ""))
    values += _secret_arg_values([str(a) for a in (getattr(server, "args", None) or [])])
    unique = {v.strip() for v in values if len(v.strip()) >= MIN_SECRET_CHARS}
    return sorted(unique, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret replaced by the mask, and URL credentials, secret-named
    values (`--token=X`, `api_key: X`, `Bearer X`) and token-shaped strings masked as well."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, SECRET_MASK)
    text = _URL_IN_TEXT.sub(lambda m: mask_url(m.group()), text)
    text = _AUTH_SCHEME_IN_TEXT.sub(lambda m: f"{m.group(1)} {SECRET_MASK}", text)
    text = _NAMED_VALUE_IN_TEXT.sub(lambda m: m.group(1) + SECRET_MASK, text)
    return _TOKEN_SHAPES.sub(SECRET_MASK, text)


def scrub_for(server: Any, text: str) -> str:
    """`scrub` with the secrets of this server."""
    return scrub(text, known_secrets(server))


class ScrubLogFilter(logging.Filter):
    """Masks URL credentials and secret-looking values in log records (settings.LOGGING puts it on
    the console handler and on the loggers of the HTTP and MCP clients, which log the server's URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is logging's to report
            return True
        scrubbed = scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True
