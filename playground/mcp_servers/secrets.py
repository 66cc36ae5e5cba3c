"""The one scrubber: keeping credentials out of pages, status frames, stored errors, exports, traces and logs.

Two sources of secrets: an MCP server's own (`known_secrets`, `scrub_for`), and every key, token,
password or credential-bearing URL the process is configured with (`process_secrets`: the settings
and environment variables with a secret's name — `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
`SECRET_KEY`, the database and Redis passwords, OpenTelemetry headers …). `scrub` always removes
the process's, also in the shortened forms upstreams echo (`sk-proj-abcd****wxyz`, a key's first
characters), so a provider's error text that quotes the key is clean before it is stored.

Env and header values are never shown (`SECRET_MASK` everywhere). Credentials also travel in the
URL (`https://user:pass@host/mcp?api_key=…`), in a stdio server's arguments (`--token=…`,
`--api-key X`) and so in error text and a server's stderr. `mask_url` and `mask_args` give the
shown forms; `scrub` replaces every known secret of a server (`known_secrets`) and anything that
looks like one in free text. Apply `scrub` before error text is stored, logged or sent.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from pathlib import PurePath
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

SECRET_MASK = "********"

# Names of flags, query parameters and KEY=value pairs whose values are credentials.
_SECRET_NAME = r"[\w.-]*(?:token|key|secret|passw(?:or)?d|pwd|auth|bearer|credential)[\w.-]*"
SECRET_NAME = re.compile(rf"^-*{_SECRET_NAME}$", re.IGNORECASE)
# Shapes of well-known tokens (provider prefixes) and long random-looking strings.
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]*(?:\*{3,}|…|\.{3})[A-Za-z0-9_-]*|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}"
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
# "Incorrect API key provided: abc123…", "access token was xyz9…" (how upstreams quote a rejected key):
# the value must hold a digit or a mask, so prose ("API key is missing") stays readable.
_KEY_PHRASE_IN_TEXT = re.compile(
    r"(?i)\b((?:api|access|secret|auth|bearer)[ _-]?(?:key|token)s?(?:\s+(?:provided|given|used|sent|was|is))?\s*[:=]?\s+)"
    r"((?=[^\s'\"]*[\d*…])[^\s'\",;]{6,})"
)
# A shortened echo of a key: its ends kept, the middle masked (`sk-abcd****wxyz`, `abcd…wxyz`).
_MASK_RUN = re.compile(r"\*{2,}|…|\.{3}|x{4,}|X{4,}")
# How many of a secret's first characters identify it in an echo; shorter secrets only by value.
PREFIX_CHARS = 8
SUFFIX_CHARS = 4
MIN_SHORTENED_SECRET_CHARS = 12


# A URL path segment shown as it is: a short word (`mcp`, `sse`, `api`, `v1`, `gateway`) or a small
# number (`/gateway/mcp/1/`). Anything else may be a key (hosted MCP servers often put one in the
# path): it is masked. Judged by where it is, not by what it looks like.
_PLAIN_SEGMENT = re.compile(r"^(?:@?[A-Za-z][A-Za-z_.-]{0,19}|v?\d{1,6})$")


def _plain_segment(segment: str) -> bool:
    return not segment or bool(_PLAIN_SEGMENT.match(segment))


def _masked_path(path: str) -> str:
    return "/".join(segment if _plain_segment(segment) else SECRET_MASK for segment in path.split("/"))


def _secret_path_segments(path: str) -> list[str]:
    found = [segment for segment in path.split("/") if not _plain_segment(segment)]
    return found + [unquote(segment) for segment in found if unquote(segment) != segment]


def mask_url(url: str) -> str:
    """The URL with its userinfo, every query value and every path segment that is not a plain word
    or small number masked (the scheme, host, port, query keys and plain segments kept)."""
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
        return urlunsplit((parts.scheme, netloc, _masked_path(parts.path), query, fragment))
    except ValueError:  # not parseable as a URL (e.g. a broken IPv6 host): mask all of it after the scheme
        scheme, sep, _ = url.partition("://")
        return f"{scheme}://{SECRET_MASK}" if sep else SECRET_MASK


def viewer_url(url: str) -> str:
    """What a viewer sees of a server's URL: the scheme and host (with its port), the path as one
    mask when there is one. No userinfo, query or fragment."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        scheme, sep, _ = url.partition("://")
        return f"{scheme}://{SECRET_MASK}" if sep else SECRET_MASK
    path = "/" + SECRET_MASK if parts.path.strip("/") or parts.query or parts.fragment else parts.path
    return urlunsplit((parts.scheme, host, path, "", ""))


def command_basename(command: str) -> str:
    """What a viewer sees of a stdio server's command: the program's file name, no directory."""
    return PurePath(str(command or "").strip()).name or str(command or "").strip()


def _looks_secret(value: str) -> bool:
    return bool(_TOKEN_SHAPES.search(value) or _LONG_RANDOM.match(value))


# Flags whose next argument is a header ("Name: value"): its value is masked, its name kept.
_HEADER_FLAGS = {"--header", "-H", "--headers"}
# Short flags that take a credential in common tools (-p password, -u user:password, -k key,
# -t token, -a auth): the next argument is masked. Other short flags (-y, -m, -v) are left alone.
_SECRET_SHORT_FLAGS = {"-p", "-P", "-u", "-k", "-K", "-t", "-a"}
# A header written as one argument: `Authorization: Bearer x`, `X-Api-Key:abc`.
_HEADER_ARG = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9-]{0,63})\s*:\s*(?P<value>\S.*)$", re.DOTALL)


def _mask_header(header: str) -> tuple[str, list[str]]:
    """A header argument shown (`Name: ********`) and the secrets in it (its value, and the value's
    token after a scheme such as Bearer)."""
    match = _HEADER_ARG.match(header)
    if match is None:
        return SECRET_MASK, [header]
    value = match["value"].strip()
    return f"{match['name']}: {SECRET_MASK}", [value, *value.split()[1:]]


def _mask_args_with_secrets(args: Sequence[str]) -> tuple[list[str], list[str]]:
    shown: list[str] = []
    secrets_found: list[str] = []
    expect: str = ""  # "value" after a secret flag, "header" after --header
    for arg in (str(a) for a in args):
        if expect and not (arg.startswith("-") and len(arg) > 1):
            if expect == "header":
                masked, found = _mask_header(arg)
            else:
                masked, found = SECRET_MASK, [arg]
            shown.append(masked)
            secrets_found += found
            expect = ""
            continue
        expect = ""
        name, sep, value = arg.partition("=")
        if sep and name in _HEADER_FLAGS:
            masked, found = _mask_header(value)
            shown.append(f"{name}={masked}")
            secrets_found += found
        elif sep and SECRET_NAME.match(name) and value:
            shown.append(f"{name}={SECRET_MASK}")
            secrets_found.append(value)
        elif arg in _HEADER_FLAGS:
            shown.append(arg)
            expect = "header"
        elif arg in _SECRET_SHORT_FLAGS or (arg.startswith("-") and SECRET_NAME.match(arg)):
            shown.append(arg)
            expect = "value"
        elif len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and arg[:2] in _SECRET_SHORT_FLAGS:
            shown.append(arg[:2] + SECRET_MASK)  # -pSECRET
            secrets_found.append(arg[2:])
        elif "://" in arg:
            shown.append(mask_url(arg))
            secrets_found += _url_secrets(arg)
        elif _looks_secret(arg):
            shown.append(SECRET_MASK)
            secrets_found.append(arg)
        elif (match := _HEADER_ARG.match(arg)) and SECRET_NAME.match(match["name"]):
            masked, found = _mask_header(arg)
            shown.append(masked)
            secrets_found += found
        else:
            shown.append(arg)
    return shown, secrets_found


def mask_args(args: Sequence[str]) -> list[str]:
    """A stdio server's arguments with secret values masked, by position: the argument after a
    secret-named flag (`--api-key X`) or a credential short flag (`-p X`, `-u X`), the value of a
    header after `--header` / `-H` (`Authorization: ********`), `--token=X`, secret-named `KEY=value`
    pairs, URL credentials and path keys, and values that look like tokens."""
    return _mask_args_with_secrets(args)[0]


def _secret_arg_values(args: Sequence[str]) -> list[str]:
    return _mask_args_with_secrets(args)[1]


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
        found += [value for _, value in parse_qsl(parts.fragment)]
        raw_userinfo = parts.netloc.rpartition("@")[0]
        found += raw_userinfo.split(":") if raw_userinfo else []  # the percent-encoded forms too
        found += [item.partition("=")[2] for item in parts.query.split("&")]
        found += _secret_path_segments(parts.path)
    except ValueError:
        return []
    return found


def known_secrets(server: Any) -> list[str]:
    """Every secret value of a server (an `McpServer` row or a `ServerConfig`): header values (and a
    header's token after its scheme), env values that are credentials, URL credentials, query values
    and path keys, and the values of secret arguments. Longest first, so a secret inside another is replaced with it."""
    values: list[str] = []
    env: Mapping[str, Any] = getattr(server, "env", None) or {}
    headers: Mapping[str, Any] = getattr(server, "headers", None) or {}
    # Env values only when they are credentials: a secret name, a token's shape, or a URL's
    # credentials. PYTHONPATH, PATH or a port are not masked in every error and log line.
    for key, value in env.items():
        value = str(value)
        if SECRET_NAME.match(str(key)) or _looks_secret(value):
            values.append(value)
        elif "://" in value:
            values += _url_secrets(value)
    for value in (str(v) for v in headers.values()):
        values.append(value)
        values += value.split()[1:]  # "Bearer abc" → also "abc"
    values += _url_secrets(str(getattr(server, "url", "") or ""))
    values += _secret_arg_values([str(a) for a in (getattr(server, "args", None) or [])])
    unique = {v.strip() for v in values if len(v.strip()) >= MIN_SECRET_CHARS}
    return sorted(unique, key=len, reverse=True)


# Settings that are credential-bearing URLs (their userinfo and query values are secrets).
_URL_SETTINGS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
# Environment variables whose values are `name=value` pairs of credentials (OpenTelemetry's headers).
_HEADER_LIST_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
# A value this plain is a setting, not a credential, whatever its variable is called (`..._TOKENS=4096`).
_PLAIN_VALUE = re.compile(r"^(?:\d+(?:\.\d+)?|true|false|yes|no|on|off|none|auto(?::\d+)?)$", re.IGNORECASE)
MIN_PROCESS_SECRET_CHARS = 8
# A setting or variable holding a credential ends in one of these (`OPENAI_API_KEY`, `GITHUB_TOKEN`,
# `PLAYGROUND_ADMIN_PASSWORD`); `AUTH_USER_MODEL` or `AGENT_MAX_TOKENS` do not.
_SECRET_SETTING = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?|AUTH)$", re.IGNORECASE)


def _configured_values() -> dict[str, str]:
    """The process's settings and environment, as name → text (settings win)."""
    values = dict(os.environ)
    from django.conf import settings  # here, not at import: the log filter is built while settings load

    if settings.configured:
        for name in dir(settings):
            if name.isupper() and isinstance(value := getattr(settings, name, None), str):
                values[name] = value
        database = (getattr(settings, "DATABASES", None) or {}).get("default") or {}
        if database.get("PASSWORD"):
            values["DATABASE_PASSWORD"] = str(database["PASSWORD"])
    return values


def _find_process_secrets() -> tuple[str, ...]:
    found: list[str] = []
    for name, value in _configured_values().items():
        value = value.strip()
        if not value:
            continue
        if name in _URL_SETTINGS or ("://" in value and not _SECRET_SETTING.search(name)):
            found += _url_secrets(value)
        elif name in _HEADER_LIST_VARIABLES:
            found += [pair.partition("=")[2].strip() for pair in value.split(",")]
            found += [word for pair in value.split(",") for word in pair.partition("=")[2].split()[1:]]
        elif _SECRET_SETTING.search(name) and not value.startswith(("/", "~", "./")):
            found.append(value)
    unique = {v.strip() for v in found if len(v.strip()) >= MIN_PROCESS_SECRET_CHARS and not _PLAIN_VALUE.match(v.strip())}
    return tuple(sorted(unique, key=len, reverse=True))


_process_secrets_cache: dict[str, Any] = {"environment": None, "secrets": None}


def forget_process_secrets(**_: Any) -> None:
    """Drop the cached process secrets (connected to Django's `setting_changed`, so a changed key is seen)."""
    _process_secrets_cache["secrets"] = None


def process_secrets() -> tuple[str, ...]:
    """Every credential the process is configured with: values of settings and environment
    variables named like one (`…_KEY`, `…_TOKEN`, `…_PASSWORD`; not plain numbers or switches),
    credentials in URL settings, and OpenTelemetry header values. Longest first. Worked out once
    (again when a setting or the environment changes): scrubbing runs on every log record."""
    # The environment's raw bytes, not `os.environ.items()`: that decodes every variable, which cost
    # more than all the rest of scrubbing a log record (25 µs of ~75 µs; the raw mapping: ~1.5 µs).
    environment = hash(tuple(getattr(os.environ, "_data", os.environ).items()))
    if _process_secrets_cache["secrets"] is None or _process_secrets_cache["environment"] != environment:
        _process_secrets_cache.update(environment=environment, secrets=_find_process_secrets())
    return _process_secrets_cache["secrets"]


_echo_patterns: dict[tuple[str, ...], re.Pattern[str]] = {}


def _echo_pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """Words that may be a shortened echo of one of `secrets`: those starting with a secret's
    first characters, and those with a masked middle (checked one by one in `_shortened_echo`)."""
    pattern = _echo_patterns.get(secrets)
    if pattern is None:
        prefixes = sorted({re.escape(s[:PREFIX_CHARS]) for s in secrets if len(s) >= MIN_SHORTENED_SECRET_CHARS})
        starts = f"(?:{'|'.join(prefixes)})[^\\s'\"<>(),;]*|" if prefixes else ""
        pattern = re.compile(rf"(?<![^\s'\"<>(),;])(?:{starts}[^\s'\"<>(),;]*(?:\*{{2,}}|…|\.{{3}}|x{{4,}}|X{{4,}})[^\s'\"<>(),;]*)")
        if len(_echo_patterns) > 32:  # settings changed many times (tests): start over
            _echo_patterns.clear()
        _echo_patterns[secrets] = pattern
    return pattern


def _shortened_echo(word: str, secrets: Sequence[str]) -> bool:
    """Whether `word` is one of `secrets` shortened the way upstreams echo a key: it begins with
    the secret's first characters, or it has a masked middle and shares the secret's first or last ones."""
    for secret in secrets:
        if len(secret) < MIN_SHORTENED_SECRET_CHARS:
            continue
        if word.startswith(secret[:PREFIX_CHARS]):
            return True
        if _MASK_RUN.search(word) and (word.startswith(secret[:3]) or word.rstrip(".").endswith(secret[-SUFFIX_CHARS:])):
            return True
    return False


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret (those given and the process's own) replaced by the mask, the
    process's also in shortened echoes, and URL credentials, secret-named values (`--token=X`,
    `api_key: X`, `API key provided: X`, `Bearer X`) and token-shaped strings masked as well."""
    if not text:
        return text
    own = process_secrets()
    for secret in sorted({s for s in [*secrets, *own] if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, SECRET_MASK)
    if own:
        text = _echo_pattern(own).sub(lambda m: SECRET_MASK if _shortened_echo(m.group(), own) else m.group(), text)
    text = _URL_IN_TEXT.sub(lambda m: mask_url(m.group()), text)
    text = _AUTH_SCHEME_IN_TEXT.sub(lambda m: f"{m.group(1)} {SECRET_MASK}", text)
    text = _KEY_PHRASE_IN_TEXT.sub(lambda m: m.group(1) + SECRET_MASK, text)
    text = _NAMED_VALUE_IN_TEXT.sub(lambda m: m.group(1) + SECRET_MASK, text)
    return _TOKEN_SHAPES.sub(SECRET_MASK, text)


def scrub_for(server: Any, text: str) -> str:
    """`scrub` with the secrets of this server."""
    return scrub(text, known_secrets(server))


class ScrubLogFilter(logging.Filter):
    """Masks URL credentials and secret-looking values in log records (settings.LOGGING puts it on
    the console handler and on the loggers of the HTTP and MCP clients, which log the server's URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "secrets_scrubbed", False):
            return True  # its logger's filter did it already; the handler's need not do it again
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is logging's to report
            return True
        scrubbed = scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        record.secrets_scrubbed = True
        return True


def mask_arguments(value: Any, secrets: Iterable[str] = ()) -> Any:
    """Tool arguments as a page may show them: the value of every key named like a secret
    (`api_key`, `password`, `Authorization` …) masked, every other string scrubbed (`scrub`: the
    process's keys, URL credentials, token-shaped strings). The structure, and so the JSON, stays."""
    secrets = tuple(secrets)
    if isinstance(value, Mapping):
        return {key: (SECRET_MASK if isinstance(key, str) and SECRET_NAME.match(key) and _maskable(item)
                      else mask_arguments(item, secrets))
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_arguments(item, secrets) for item in value]
    if isinstance(value, str):
        return scrub(value, secrets)
    return value


def _maskable(value: Any) -> bool:
    # Only text is hidden whole: a structure under a secret-named key (`"auth": {"user": …}`) is walked,
    # and a number (`"max_tokens": 100`) is no credential.
    return isinstance(value, str) and value != ""
