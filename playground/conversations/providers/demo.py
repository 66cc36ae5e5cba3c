"""The offline demo agent: a deterministic stand-in for a model, for running without an API key.

It reads the same Messages API request a real model would get (the engine builds it, the loop sends
it through `create`) and answers in Messages API shapes, so the loop, events and executor are
exactly those a real model goes through. Its policy, one step per request:

1. After the person's message: a message that is only arithmetic goes to a loaded tool with an
   expression argument (the calculator); else, if a loaded tool fits the message better than any announced deferred tool,
   call it; otherwise call ToolSearch with keywords from the message.
2. After a ToolSearch result: call the best of the tools it loaded (now present in `tools`) that
   shares a word with the message (none fits: it says so and calls nothing), with
   arguments filled from the message where the schema allows (a timezone ← a city in the message
   through `zoneinfo`, numbers, quoted strings, clock times such as 14:30 or 9am, enum values that
   appear in the text). When the message lacks a required value that has no safe default (a time to
   convert, say), it asks the person for it, as a model would, instead of sending a call the tool
   must reject.
3. After a tool result: answer with what the tool returned. A "load it first" error makes it
   `select:` the tool, as Claude Code instructs models to do.
"""
from __future__ import annotations

import json
import re
import zoneinfo
from functools import lru_cache
from typing import Any

from playground.conversations.providers.base import ModelProvider, ProviderResponse
from playground.conversations.subagents import AGENT_TOOL_NAME
from playground.engine.tokens import CharEstimateCounter, count_messages
from playground.engine.announcements import announced_lines
from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME
from playground.engine.toolsearch_tool import WIRE_STYLES

TOOL_SEARCH = TOOL_SEARCH_NAME
NOT_CALLABLE_BY_DEMO = {TOOL_SEARCH, AGENT_TOOL_NAME}
MAX_TOOL_CALLS_PER_RUN = 4
STOPWORDS = frozenset(
    """a about an and any are as at be can could do does for from get give have how i in is it its me my
    of on or please show tell that the their them then there this to up use using want what whats when
    where which who why will with would you your now current currently""".split()
)
QUERY_PROPERTY_NAMES = {"query", "q", "text", "prompt", "message", "input", "content", "search", "question"}
EXPRESSION_PROPERTY_NAMES = {"expression", "formula", "math", "equation"}
ARITHMETIC_WORDS = {"calculate", "compute", "evaluate", "solve", "math", "times", "plus", "minus", "divided"}
# Where a quoted string in the message goes first ("Create an issue titled 'Login broken'" → title).
TITLE_PROPERTY_NAMES = {"title", "name", "subject", "summary", "text", "message", "content", "body"}
PLACE_PROPERTY_NAMES = {"city", "location", "place", "destination", "origin", "town", "address", "region", "country"}
# A capitalised word (or run of them) that does not open a sentence: "weather in Paris" → Paris.
PROPER_NOUN = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")
# "14:30", "9am", "9:30 pm", "12 p.m." (a bare number is not a clock time).
CLOCK_TIME = re.compile(r"\b([01]?\d|2[0-3])(?::([0-5]\d))?\s*([ap])\.?m\b\.?|\b([01]?\d|2[0-3]):([0-5]\d)\b", re.I)
ARITHMETIC = re.compile(r"[-+*/%^().\d\s]*\d[-+*/%^().\d\s]*[-+*/%^][-+*/%^().\d\s]*\d[-+*/%^().\d\s]*")
WORD = re.compile(r"[a-z0-9]+")

_ESTIMATE = CharEstimateCounter()  # the engine's offline estimate: the demo reports usage the same way


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


def keywords(text: str) -> list[str]:
    seen: list[str] = []
    for word in WORD.findall(text.lower()):
        if len(word) >= 3 and word not in STOPWORDS and word not in seen:
            seen.append(word)
    return seen


def name_parts(name: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return [p for p in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if p]


def tool_score(words: list[str], name: str, description: str = "") -> int:
    parts = set(name_parts(name))
    described = set(WORD.findall(description.lower()))
    return sum(2 if w in parts else 1 if w in described else 0 for w in words)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _result_text(block: dict[str, Any]) -> str:
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    return "\n".join(c.get("text", "") for c in inner or [] if isinstance(c, dict) and c.get("type") == "text")


def _referenced_names(messages: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for message in messages:
        for block in _blocks(message):
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                names.update(c.get("tool_name", "") for c in block["content"] if c.get("type") == "tool_reference")
    return names


def _search_matches(block: dict[str, Any]) -> list[str]:
    """Tool names a ToolSearch result loaded: tool_reference blocks (native) or the JSON output (client)."""
    inner = block.get("content")
    if isinstance(inner, list):
        refs = [c.get("tool_name", "") for c in inner if c.get("type") == "tool_reference"]
        if refs:
            return refs
    try:
        output = json.loads(_result_text(block))
    except (json.JSONDecodeError, TypeError):
        return []
    return [str(n) for n in output.get("matches", [])] if isinstance(output, dict) else []


def _arithmetic(text: str) -> str:
    """The longest arithmetic expression in the text ("what is 2 + 2 * 3?" → "2 + 2 * 3")."""
    found = sorted((m.strip() for m in ARITHMETIC.findall(text)), key=len, reverse=True)
    return found[0].replace("^", "**") if found else ""


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


def fill_arguments(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Arguments for `schema` taken from the person's words; required values it cannot find get a safe default."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    lowered = text.lower()
    cities = city_timezones()
    # Cities in the order the person wrote them (first → source, second → target for conversions).
    mentioned = [(lowered.find(c), c) for c in cities if re.search(rf"\b{re.escape(c)}\b", lowered)]
    found_zones = [cities[c] for _, c in sorted(mentioned)]
    zone_properties = [n for n, p in properties.items() if isinstance(p, dict) and "timezone" in f"{n} {p.get('description', '')}".lower()]
    if len(zone_properties) >= 2:  # a conversion: "… New York time to Berlin" → New York, then Berlin
        found_zones = _conversion_order(sorted(mentioned), lowered, cities) or found_zones
    numbers = re.findall(r"(?<![\w:.])-?\d+(?:\.\d+)?(?![\w:])", text)
    quoted = re.findall(r"[\"“']([^\"”']+)[\"”']", text)
    times = clock_times(text)
    places = _places(text, [c for _, c in sorted(mentioned)])
    arguments: dict[str, Any] = {}
    # Title-like properties take their values first; the arguments keep the schema's order.
    for name in sorted(properties, key=lambda n: n.lower() not in TITLE_PROPERTY_NAMES):
        prop = properties[name]
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type")
        about = f"{name} {prop.get('description', '')}".lower()
        value: Any = None
        if prop.get("enum"):
            value = next((v for v in prop["enum"] if str(v).lower() in lowered), prop["enum"][0] if name in required else None)
        elif kind == "string" and "timezone" in about:
            value = found_zones.pop(0) if found_zones else ("UTC" if name in required else None)
        elif kind == "string" and ("hh:mm" in about or name == "time"):
            value = times.pop(0) if times else None  # no safe default: the agent asks (_call_or_ask)
        elif kind == "string" and name.lower() in EXPRESSION_PROPERTY_NAMES and _arithmetic(text):
            value = _arithmetic(text)
        elif kind in ("integer", "number") and numbers:
            raw = numbers.pop(0)
            value = int(float(raw)) if kind == "integer" else float(raw)
        elif kind == "string" and name.lower() in PLACE_PROPERTY_NAMES and places:
            value = places.pop(0)
        elif kind == "string" and quoted:
            value = quoted.pop(0)
        elif kind == "string" and name.lower() in QUERY_PROPERTY_NAMES:
            value = text
        elif kind == "boolean" and name in required:
            value = False
        elif kind == "string" and name in required:
            value = text
        elif kind in ("array", "object") and name in required:  # empty, but the call goes out (and its permission prompt)
            value = [] if kind == "array" else {}
        if value is not None:
            arguments[name] = value
    return {name: arguments[name] for name in properties if name in arguments}


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


def fillable(schema: dict[str, Any], text: str) -> bool:
    """Whether every required argument can be taken from the message."""
    return set(schema.get("required") or []) <= set(fill_arguments(schema, text))


class DemoAgentProvider(ModelProvider):
    key = "demo"
    label = "offline demo agent"
    offline = True
    wire_styles = WIRE_STYLES  # it cannot run Anthropic's server-side search

    def create(self, request_kwargs: dict[str, Any]) -> ProviderResponse:
        messages: list[dict[str, Any]] = request_kwargs.get("messages", [])
        tools: list[dict[str, Any]] = [t for t in request_kwargs.get("tools", []) or [] if "name" in t]
        referenced = _referenced_names(messages)
        # What a model may call: non-deferred tools, and deferred ones a tool_reference loaded.
        callable_tools = {t["name"]: t for t in tools if not t.get("defer_loading") or t["name"] in referenced}
        start = self._person_message_index(messages)
        person_text = " ".join(
            b.get("text", "") for b in _blocks(messages[start])
            if b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<")  # announcements, summaries
        ) if start >= 0 else ""
        run = messages[start + 1:] if start >= 0 else []
        calls = [b for m in run if m.get("role") == "assistant" for b in _blocks(m) if b.get("type") == "tool_use"]
        results = {b.get("tool_use_id"): b for m in run if m.get("role") == "user" for b in _blocks(m) if b.get("type") == "tool_result"}

        if calls and calls[-1].get("id") in results:
            last_call, last_result = calls[-1], results[calls[-1]["id"]]
            if len(calls) >= MAX_TOOL_CALLS_PER_RUN:
                return self._answer(request_kwargs, f"I stopped after {len(calls)} tool calls. Last result:\n{_result_text(last_result)}")
            if last_call["name"] == TOOL_SEARCH:
                return self._after_search(request_kwargs, person_text, last_result, callable_tools, calls)
            error_text = _result_text(last_result)
            if last_result.get("is_error") and "select:" in error_text and TOOL_SEARCH in callable_tools:
                if not any(c["name"] == TOOL_SEARCH and c["input"].get("query") == f"select:{last_call['name']}" for c in calls):
                    return self._call(request_kwargs, TOOL_SEARCH, {"query": f"select:{last_call['name']}"}, calls,
                                      "That tool must be loaded first; selecting it.")
            if last_result.get("is_error"):
                return self._answer(request_kwargs, f"{last_call['name']} failed: {error_text}")
            return self._answer(request_kwargs, f"Here is what {last_call['name']} returned:\n{error_text}")
        return self._first_step(request_kwargs, person_text, callable_tools, calls)

    # -- steps ---------------------------------------------------------------------------------
    def _first_step(self, request_kwargs: dict[str, Any], text: str, callable_tools: dict[str, dict[str, Any]],
                    calls: list[dict[str, Any]]) -> ProviderResponse:
        words = keywords(text)
        # "What is 17 * 23?" has no keyword, but a loaded tool computes it. Only a message that is
        # nothing but arithmetic: "my calendar for 2026-12-03" holds "2026-12-03" too.
        if _arithmetic(text) and not [w for w in words if not w.isdigit() and w not in ARITHMETIC_WORDS]:
            calculator = next((t for n, t in callable_tools.items() if n not in NOT_CALLABLE_BY_DEMO and any(
                p.lower() in EXPRESSION_PROPERTY_NAMES for p in (t.get("input_schema") or {}).get("properties") or {})), None)
            if calculator is not None:
                return self._call_or_ask(request_kwargs, calculator, text, calls, f"Calling {calculator['name']}.")
        if not words:
            return self._answer(request_kwargs, "Ask me something a tool can answer, for example “what time is it in Tokyo?”.")
        best_loaded, loaded_score = self._best(words, [t for n, t in callable_tools.items() if n not in NOT_CALLABLE_BY_DEMO])
        deferred_names = self._announced(request_kwargs)
        deferred_score = max((tool_score(words, n) for n in deferred_names), default=0)
        # A loaded tool only when it fits strictly better: on a tie the deferred one is worth a search.
        if best_loaded and loaded_score > 0 and loaded_score > deferred_score:
            return self._call_or_ask(request_kwargs, best_loaded, text, calls, f"Calling {best_loaded['name']}.")
        if TOOL_SEARCH in callable_tools:
            return self._call(request_kwargs, TOOL_SEARCH, {"query": " ".join(words[:4])}, calls,
                              "The tools I need are deferred; searching for them.")
        return self._answer(request_kwargs, "None of my tools fits that request.")

    def _after_search(self, request_kwargs: dict[str, Any], text: str, result: dict[str, Any],
                      callable_tools: dict[str, dict[str, Any]], calls: list[dict[str, Any]]) -> ProviderResponse:
        if result.get("is_error"):
            return self._answer(request_kwargs, f"ToolSearch failed: {_result_text(result)}")
        matches = [n for n in _search_matches(result) if n in callable_tools and n not in NOT_CALLABLE_BY_DEMO]
        called = {c["name"] for c in calls}
        matches = [n for n in matches if n not in called] or []
        if not matches:
            return self._answer(request_kwargs, "ToolSearch found no tool I could use for that.")
        words = keywords(text)
        fitting = [callable_tools[n] for n in matches if tool_score(words, n, callable_tools[n].get("description", "")) > 0]
        if not fitting:  # search ranks something first even for "hello"; a model would not call it
            return self._answer(request_kwargs, f"ToolSearch loaded {', '.join(matches)}, but none of them shares a word "
                                                "with your request, so I called none.")
        # Best keyword fit first; among equals, a tool whose required arguments the message can fill.
        chosen = max(fitting, key=lambda t: (tool_score(words, t["name"], t.get("description", "")), fillable(t.get("input_schema") or {}, text)))
        return self._call_or_ask(request_kwargs, chosen, text, calls, f"Loaded {chosen['name']}; calling it.")

    def _call_or_ask(self, request_kwargs: dict[str, Any], tool: dict[str, Any], text: str, calls: list[dict[str, Any]],
                     note: str) -> ProviderResponse:
        """Call `tool` with arguments from the message, or ask for the required values it does not give."""
        schema = tool.get("input_schema") or {}
        arguments = fill_arguments(schema, text)
        missing = [name for name in schema.get("required") or [] if name not in arguments]
        if missing:
            properties = schema.get("properties") or {}
            wanted = "; ".join(
                f"{name} ({about})" if (about := str((properties.get(name) or {}).get("description", "")).strip()) else name
                for name in missing
            )
            return self._answer(request_kwargs, f"{tool['name']} fits, but your message does not say its {wanted}. "
                                                "Tell me, and I will call it.")
        return self._call(request_kwargs, tool["name"], arguments, calls, note)

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _person_message_index(messages: list[dict[str, Any]]) -> int:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            blocks = _blocks(message)
            if message.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks) and any(
                b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<") for b in blocks
            ):
                return index
        return -1

    @staticmethod
    def _announced(request_kwargs: dict[str, Any]) -> list[str]:
        """The deferred tools the request announced, read as the engine reads its announcements
        (system prompt, then the deltas in the history), in any layout: a grouped server line gives
        its tools' full names; a summary line is scored as it stands."""
        system = request_kwargs.get("system") or ""
        if isinstance(system, list):
            system = "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        lines = announced_lines([{"role": "user", "content": system}, *request_kwargs.get("messages", [])]) or {}
        names: list[str] = []
        for key, line in lines.items():
            head, separator, rest = line.partition(": ")
            if key.startswith(MCP_PREFIX) and separator and head == key:  # grouped: `mcp__server: a, b`
                names.extend(f"{key}__{short.strip()}" for short in rest.split(",") if short.strip())
            else:
                names.append(line)
        return names

    @staticmethod
    def _best(words: list[str], tools: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, int]:
        best, best_score = None, 0
        for tool in tools:  # ties keep request order: deterministic
            score = tool_score(words, tool["name"], tool.get("description", ""))
            if score > best_score:
                best, best_score = tool, score
        return best, best_score

    @staticmethod
    def _usage(request_kwargs: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        return {
            "input": count_messages(_ESTIMATE, request_kwargs),
            "output": _ESTIMATE.count_text(json.dumps(content)),
            "cache_read": 0,
            "cache_write": 0,
        }

    def _call(self, request_kwargs: dict[str, Any], name: str, arguments: dict[str, Any], calls: list[dict[str, Any]],
              note: str) -> ProviderResponse:
        all_calls = sum(1 for m in request_kwargs.get("messages", []) if m.get("role") == "assistant"
                        for b in _blocks(m) if b.get("type") == "tool_use")
        content = [
            {"type": "text", "text": note},
            {"type": "tool_use", "id": f"toolu_demo_{all_calls + 1:04d}", "name": name, "input": arguments},
        ]
        return ProviderResponse(content=content, stop_reason="tool_use", usage=self._usage(request_kwargs, content),
                                model="offline-demo-agent")

    def _answer(self, request_kwargs: dict[str, Any], text: str) -> ProviderResponse:
        content = [{"type": "text", "text": text}]
        return ProviderResponse(content=content, stop_reason="end_turn", usage=self._usage(request_kwargs, content),
                                model="offline-demo-agent")
