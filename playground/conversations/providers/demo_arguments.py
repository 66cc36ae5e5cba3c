"""How the offline demo agent fills a tool's arguments from the person's message.

A small, deterministic extractor, not a language model. `find_mentions` reads the values a message
spells out — quoted strings, `owner/repo`, file paths, URLs, numbers, clock times, `#channel`
names, cities (as IANA timezones) and other place names, arithmetic — and `fill_arguments` maps
them onto a tool's input schema by each property's name, type and description:

1. a value written right after (or before) the property's name wins: "on branch main",
   "titled 'Login broken'", "the playground repo";
2. then a property takes the kind of value its name or description asks for (a `path` a path, an
   `owner` the owner of `owner/repo`, a `channel_id` a `#channel`, a timezone a city, a number a
   number, an enum one of its values);
3. text-like properties (title, message, content, …) take a quoted string, query-like ones the
   message's search terms.

A required value it cannot find is left out: `missing` names it, and the agent asks the person for
it rather than send a call with a made-up value. Two safe defaults are kept: a timezone the message
does not name is UTC, and a required list or object (which a sentence cannot spell) is sent empty,
so the call, and its permission prompt, still happen.
"""
from __future__ import annotations

import json
import re
import zoneinfo
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from playground.engine.search.text import STOPWORDS, request_terms, split_identifier

QUERY_PROPERTY_NAMES = {"query", "q", "search", "search_query", "keywords", "question", "terms"}
TEXT_PROPERTY_NAMES = {"title", "name", "subject", "summary", "text", "message", "content", "body", "prompt", "comment"}
EXPRESSION_PROPERTY_NAMES = {"expression", "formula", "math", "equation"}
PLACE_PROPERTY_NAMES = {"city", "location", "place", "destination", "origin", "town", "address", "region", "country"}
PATH_WORDS = {"path", "file", "filename", "filepath", "dir", "directory", "folder"}
REPO_NAMES = {"repo", "repository", "repo_name", "repository_name"}
# Other words a person uses for a property's name ("the GitHub repository 'playground'").
NAME_SYNONYMS = {"repo": ("repository",), "dir": ("directory", "folder"), "q": ("query",)}
# Between a property's name and its value: "branch main", "branch named main", "limit = 5".
NAME_LINK = r"\s*(?:(?:called|named|is|=|:)\s*)?"

QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|`([^`]+)`|(?<![\w'])'([^']+)'(?![\w'])")
URL = re.compile(r"\bhttps?://[^\s\"'<>]+[^\s\"'<>.,;:!?)]")
CHANNEL = re.compile(r"(?<![\w&#])#([A-Za-z][\w.-]*)")
# "octo/playground": two segments, no leading slash or dot, the last without a file extension.
REPO = re.compile(r"(?<![\w./~:@-])([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w-]*(?:\.(?![A-Za-z]{1,5}\b)[\w-]+)*)(?![\w./-])")
# "/etc/hosts", "./src/app.py", "~/notes", "docs/setup.md", "notes.txt".
PATH = re.compile(
    r"(?<![\w/:.~-])(?:(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*/?|(?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b(?!\.\w))"
)
NUMBER = re.compile(r"(?<![\w:./-])-?\d+(?:\.\d+)?(?![\w:/])")
# "14:30", "9am", "9:30 pm", "12 p.m." (a bare number is not a clock time).
CLOCK_TIME = re.compile(r"\b([01]?\d|2[0-3])(?::([0-5]\d))?\s*([ap])\.?m\b\.?|\b([01]?\d|2[0-3]):([0-5]\d)\b", re.I)
ARITHMETIC = re.compile(r"[-+*/%^().\d\s]*\d[-+*/%^().\d\s]*[-+*/%^][-+*/%^().\d\s]*\d[-+*/%^().\d\s]*")
# A capitalised word (or run of them) that does not open a sentence: "weather in Paris" → Paris.
PROPER_NOUN = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")


@lru_cache(maxsize=1)
def city_timezones() -> dict[str, str]:
    """'tokyo' → 'Asia/Tokyo', 'new york' → 'America/New_York' (first region wins, deterministic)."""
    cities: dict[str, str] = {}
    for name in sorted(zoneinfo.available_timezones()):
        if "/" not in name or name.startswith(("Etc/", "SystemV/", "US/", "Canada/", "Brazil/", "Mexico/", "Chile/")):
            continue
        city = name.rsplit("/", 1)[1].replace("_", " ").lower()
        cities.setdefault(city, name)
    return cities


def clock_times(text: str) -> list[str]:
    """24-hour "HH:MM" for each clock time in the text, in order: "9am" → "09:00", "9:30 pm" → "21:30"."""
    found = []
    for match in CLOCK_TIME.finditer(text):
        hour_12, minute_12, half, hour_24, minute_24 = match.groups()
        if hour_24 is not None:
            found.append(f"{int(hour_24):02d}:{minute_24}")
        elif 1 <= int(hour_12) <= 12:
            hour = int(hour_12) % 12 + (12 if half.lower() == "p" else 0)
            found.append(f"{hour:02d}:{minute_12 or '00'}")
        elif minute_12 is not None:  # "14:30 pm": already a 24-hour time
            found.append(f"{int(hour_12):02d}:{minute_12}")
    return found


def arithmetic(text: str) -> str:
    """The longest arithmetic expression in the text ("what is 2 + 2 * 3?" → "2 + 2 * 3")."""
    found = sorted((m.strip() for m in ARITHMETIC.findall(text)), key=len, reverse=True)
    return found[0].replace("^", "**") if found else ""


@dataclass
class Mentions:
    """The values a message spells out, each list in the order written."""

    quoted: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    repos: list[tuple[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    places: list[str] = field(default_factory=list)
    expression: str = ""


def find_mentions(text: str, *, conversion: bool = False) -> Mentions:
    """Everything `fill_arguments` can use. `conversion`: two timezones are wanted, so the cities on
    either side of " to " come first. A fresh copy each time (the caller takes values out of it); the
    reading itself is kept per text, since the first step reads the same message for every tool."""
    read = _read_mentions(text, conversion)
    return Mentions(**{f.name: list(getattr(read, f.name)) if isinstance(getattr(read, f.name), list) else getattr(read, f.name)
                       for f in fields(Mentions)})


@lru_cache(maxsize=256)
def _read_mentions(text: str, conversion: bool) -> Mentions:
    taken: list[tuple[int, int]] = []  # a span read as one kind is not read again as another

    def free(match: re.Match[str]) -> bool:
        return not any(start < match.end() and match.start() < end for start, end in taken)

    def take(pattern: re.Pattern[str]) -> list[re.Match[str]]:
        found = [m for m in pattern.finditer(text) if free(m)]
        taken.extend(m.span() for m in found)
        return found

    mentions = Mentions()
    mentions.quoted = [next(g for g in m.groups() if g is not None) for m in take(QUOTED)]
    mentions.urls = [m.group(0) for m in take(URL)]
    mentions.repos = [(m.group(1), m.group(2)) for m in take(REPO)]
    mentions.paths = [m.group(0) for m in take(PATH)]
    mentions.channels = [m.group(1) for m in take(CHANNEL)]
    mentions.times = clock_times(text)
    taken.extend(m.span() for m in CLOCK_TIME.finditer(text))
    mentions.numbers = [m.group(0) for m in take(NUMBER)]
    mentions.expression = arithmetic(text)
    lowered = text.lower()
    cities = city_timezones()
    mentioned = sorted((lowered.find(c), c) for c in cities if re.search(rf"\b{re.escape(c)}\b", lowered))
    mentions.zones = [cities[c] for _, c in mentioned]
    if conversion:
        mentions.zones = _conversion_order(mentioned, lowered, cities) or mentions.zones
    mentions.places = _places(text, [c for _, c in mentioned])
    return mentions


def _conversion_order(mentioned: list[tuple[int, str]], lowered: str, cities: dict[str, str]) -> list[str]:
    """The zones of a conversion: the last city before a " to " and the first after it, then the
    others in order ("What time is it in Tokyo, and convert 9am New York time to Berlin?")."""
    for to in re.finditer(r"\bto\b", lowered):
        before = [c for at, c in mentioned if at < to.start()]
        after = [c for at, c in mentioned if at > to.end()]
        if before and after:
            pair = [before[-1], after[0]]
            return [cities[c] for c in pair + [c for _, c in mentioned if c not in pair]]
    return []


def _places(text: str, known_cities: list[str]) -> list[str]:
    """Place names in the order written: known cities (as the person spelled them), else proper nouns."""
    found: list[str] = []
    for city in known_cities:
        match = re.search(rf"\b{re.escape(city)}\b", text, re.IGNORECASE)
        if match and match.group(0) not in found:
            found.append(match.group(0))
    return found or [m for m in PROPER_NOUN.findall(text) if m != "I"]


def _named_value(name: str, text: str) -> str | None:
    """The value written next to a property's name: "branch main", "titled 'Login broken'",
    "owner: octo", "the playground repo". A stopword is never a value ("message to #general")."""
    words = split_identifier(name)
    if not words or len(name) < 3:
        return None
    spoken = [" ".join(words), *NAME_SYNONYMS.get(name.lower(), ())]
    value = r"(\"[^\"]+\"|“[^”]+”|'[^']+'|`[^`]+`|[\w./#@:+-]+)"
    for said in spoken:
        label = r"\s+".join(re.escape(w) for w in said.split()) + r"(?:s|d|ed)?"
        for match in re.finditer(rf"\b{label}\b{NAME_LINK}{value}", text, re.I):
            found = match.group(1).strip("\"“”'`").rstrip(".,;:!?")
            if found and found.lower() not in STOPWORDS:
                return found
        for match in re.finditer(rf"(?<![\w'\"])([\w./#@-]+)\s+{label}\b", text, re.I):
            found = match.group(1)
            if found.lower() not in STOPWORDS and found.lower() not in {"new", "this", "that", "which"}:
                return found
    return None


def _typed_string(name: str, prop: dict[str, Any]) -> bool:
    """A timezone, a clock time or an expression: read only in their own form, never "next to the name"
    ("New York time" names no time)."""
    about = f"{name} {prop.get('description', '')}".lower()
    return "timezone" in about or "hh:mm" in about or name.lower() in ("time", *EXPRESSION_PROPERTY_NAMES)


def _number(raw: str, kind: str) -> int | float:
    return int(float(raw)) if kind == "integer" else float(raw)


def fill_arguments(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Arguments for `schema` taken from the person's words, in the schema's order; a required
    property nothing fits is left out (see `missing`)."""
    properties = {n: p if isinstance(p, dict) else {} for n, p in (schema.get("properties") or {}).items()}
    required = set(schema.get("required") or [])
    zone_properties = [n for n, p in properties.items() if "timezone" in f"{n} {p.get('description', '')}".lower()]
    mentions = find_mentions(text, conversion=len(zone_properties) >= 2)
    lowered = text.lower()
    arguments: dict[str, Any] = {}

    for name, prop in properties.items():  # 1. a value written next to the property's name
        kind = prop.get("type")
        if kind not in ("string", "integer", "number") or prop.get("enum") or _typed_string(name, prop):
            continue
        value = _named_value(name, text)
        if value is None:
            continue
        if kind == "string":
            arguments[name] = value
            mentions.quoted = [q for q in mentions.quoted if q != value]
            mentions.paths = [p for p in mentions.paths if p != value]
        elif NUMBER.fullmatch(value):
            arguments[name] = _number(value, kind)
            if value in mentions.numbers:
                mentions.numbers.remove(value)

    has_owner = any(n.lower() == "owner" for n in properties)
    later: list[str] = []
    for name, prop in properties.items():  # 2. the kind of value each property asks for
        if name in arguments:
            continue
        kind = prop.get("type")
        key = name.lower()
        parts = set(split_identifier(name))
        about = f"{name} {prop.get('description', '')}".lower()
        value: Any = None
        if prop.get("enum"):
            value = next((v for v in prop["enum"] if re.search(rf"\b{re.escape(str(v).lower())}\b", lowered)), None)
            if value is None and name in required and "default" in prop:
                value = prop["default"]
        elif kind in ("integer", "number"):
            value = _number(mentions.numbers.pop(0), kind) if mentions.numbers else None
        elif kind == "boolean":
            value = prop.get("default", False) if name in required else None
        elif kind in ("array", "object"):
            value = ([] if kind == "array" else {}) if name in required else None
        elif kind != "string":
            value = None
        elif "timezone" in about:
            value = mentions.zones.pop(0) if mentions.zones else ("UTC" if name in required else None)
        elif "hh:mm" in about or key == "time":
            value = mentions.times.pop(0) if mentions.times else None
        elif key in EXPRESSION_PROPERTY_NAMES:
            value = mentions.expression or None
        elif parts & {"url", "uri", "link"}:
            value = mentions.urls.pop(0) if mentions.urls else None
        elif "channel" in parts:
            value = mentions.channels.pop(0) if mentions.channels else None
        elif key == "owner":
            value = mentions.repos[0][0] if mentions.repos else None
        elif key in REPO_NAMES:
            if mentions.repos:
                owner, repo = mentions.repos[0]
                value = repo if has_owner else f"{owner}/{repo}"
        elif parts & PATH_WORDS:
            value = mentions.paths.pop(0) if mentions.paths else None
        elif key in PLACE_PROPERTY_NAMES:
            value = mentions.places.pop(0) if mentions.places else None
        else:
            later.append(name)
        if value is not None:
            arguments[name] = value

    for name in later:  # 3. quoted strings to text-like properties; search terms to query-like ones
        key = name.lower()
        if key in TEXT_PROPERTY_NAMES and mentions.quoted:
            arguments[name] = mentions.quoted.pop(0)
        elif key in QUERY_PROPERTY_NAMES:
            arguments[name] = mentions.quoted.pop(0) if mentions.quoted else " ".join(request_terms(text)) or None
            if arguments[name] is None:
                del arguments[name]
    return {name: arguments[name] for name in properties if name in arguments}


def missing(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """The required properties `arguments` leaves out."""
    return [name for name in schema.get("required") or [] if name not in arguments]


def describe_missing(schema: dict[str, Any], names: list[str]) -> str:
    """"its time (Time to convert …); mode (one of: fast, slow)" for the question the agent asks."""
    properties = schema.get("properties") or {}
    described = []
    for name in names:
        prop = properties.get(name) if isinstance(properties.get(name), dict) else {}
        about = str(prop.get("description", "")).strip()
        if prop.get("enum"):
            about = f"{about}; one of: {', '.join(map(str, prop['enum']))}" if about else f"one of: {', '.join(map(str, prop['enum']))}"
        described.append(f"{name} ({about})" if about else name)
    return "; ".join(described)


def describe_arguments(arguments: dict[str, Any], *, width: int = 60) -> str:
    """"timezone=Asia/Tokyo, files=[]" for the agent's note of what it sends."""
    shown = []
    for name, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown.append(f"{name}={text if len(text) <= width else text[: width - 1] + '…'}")
    return ", ".join(shown) if shown else "no arguments"
