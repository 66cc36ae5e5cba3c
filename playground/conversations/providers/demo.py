"""The offline demo agent: a deterministic stand-in for a model, for running without an API key.

It reads the same Messages API request a real model would get (the engine builds it, the loop sends
it through `create`) and answers in Messages API shapes, so the loop, events and executor are
exactly those a real model goes through. It reads text, search terms and the history with the
engine's own helpers, and fills arguments with the small extractor in `demo_arguments`. Its
policy, one step per request:

1. After the person's message: a message that is only arithmetic goes to a loaded tool with an
   expression argument (the calculator). Else a loaded tool that fits — its name shares a word with
   the message and the message gives its required arguments — is called, even when a deferred tool
   would fit as well (a loaded `Write` before a deferred `write_file`); so is a loaded tool that
   fits at least as well as any announced deferred one. Otherwise it calls ToolSearch with the message's
   search terms.
2. After a ToolSearch result: it calls the best of the tools the search loaded that shares a word
   with the message (none fits: it says so and calls nothing).
3. After a tool result: it answers with what the tool returned. A "load it first" error makes it
   `select:` the tool, as Claude Code instructs models to do.

Whenever the message lacks a required value, it asks the person for it instead of calling; the
person's answer is read together with the message that asked. Each reply says what it did.

Its text streams at a readable pace (`stream_or_cancel`): word by word, DEMO_STREAM_WORDS_PER_SECOND,
a reply taking at most DEMO_STREAM_MAX_SECONDS (a long tool result goes faster); 0 answers at once.
The wait between words ends at once on a cancel.
"""
from __future__ import annotations

import asyncio
import json
import re
from contextlib import nullcontext
import threading
import time
from functools import lru_cache
from typing import Any

from django.conf import settings

from playground.conversations.providers.base import (
    USAGE_ESTIMATE,
    ModelProvider,
    NeutralMessage,
    ProviderResponse,
    TextSink,
    messages_api_request,
)
from playground.conversations.providers.demo_arguments import (
    EXPRESSION_PROPERTY_NAMES,
    arithmetic,
    describe_arguments,
    describe_missing,
    fill_arguments,
    missing,
)
from playground.conversations.subagents import AGENT_TOOL_NAME
from playground.engine.announcements import FULL_CLOSE, FULL_OPEN, announced_lines
from playground.engine.execution import CallCancelled, CancelSignal
from playground.engine.history import blocks_of, discovered_tool_names, loaded_by, result_text, text_block
from playground.engine.prompt_cache import CACHE_TTLS, AnthropicCacheModel, breakpoints_of, prefix_blocks, request_ttl
from playground.engine.search.text import analyze, request_terms, split_identifier, stem
from playground.engine.tokens import CharEstimateCounter
from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME
from playground.engine.wires.base import MESSAGES_API
from playground.engine.wires.registry import profile_styles
from playground.per_process import in_loop_run, portal

TOOL_SEARCH = TOOL_SEARCH_NAME
NOT_CALLABLE_BY_DEMO = {TOOL_SEARCH, AGENT_TOOL_NAME}
MAX_TOOL_CALLS_PER_RUN = 4
ARITHMETIC_WORDS = {"calculate", "compute", "evaluate", "solve", "math", "times", "plus", "minus", "divided"}
# How a question for a missing value ends: the next message is read together with the one before.
ASKING = "Tell me, and I will call it."

_ESTIMATE = CharEstimateCounter()  # the engine's offline estimate: the demo reports usage the same way
# The prompt cache as the API keeps it (by prefix, across conversations), one per process and TTL:
# a request with breakpoints (PROMPT_CACHE on) reports the engine's cache model's split.
_PROMPT_CACHES = {ttl: AnthropicCacheModel(ttl=ttl, counter=_ESTIMATE) for ttl in CACHE_TTLS}
_PROMPT_CACHE_LOCK = threading.Lock()
_PRUNE_ABOVE = 10_000
WORD = re.compile(r"\S+\s*|\s+")  # a word with the space after it: the pieces join back into the text


def tool_score(terms: list[str], name: str, description: str = "") -> int:
    """2 points per search term in the tool's name, 1 per term in its description (stems compared)."""
    stems = [stem(t) for t in terms]
    parts = _name_stems(name)
    described = _description_stems(description) if description else frozenset()
    return sum(2 if s in parts else 1 if s in described else 0 for s in stems)


# Kept per name and description: the first step scores every loaded tool and every announced name
# against each message, and the names do not change between messages.
@lru_cache(maxsize=65_536)
def _name_stems(name: str) -> frozenset[str]:
    return frozenset(stem(p) for p in split_identifier(name))


@lru_cache(maxsize=4_096)
def _description_stems(description: str) -> frozenset[str]:
    return frozenset(analyze(description))


def named_by(terms: list[str], name: str) -> bool:
    """Whether one of the search terms is a word of the tool's name."""
    parts = _name_stems(name)
    return any(stem(t) in parts for t in terms)


def fillable(tool: dict[str, Any], text: str) -> bool:
    schema = tool.get("input_schema") or {}
    return not missing(schema, fill_arguments(schema, text))


def _person_text(message: dict[str, Any]) -> str:
    """What the person wrote: text blocks, without announcements and summaries (they open with a tag)."""
    return " ".join(b.get("text", "") for b in blocks_of(message)
                    if b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<"))


class DemoAgentProvider(ModelProvider):
    key = "demo"
    label = "offline demo agent"
    offline = True
    vendor = "anthropic"  # it reads and answers the Messages API's shapes
    otel_name = "playground.demo"  # ours: the semantic conventions have no name for it
    estimates_usage = True
    wire_styles = tuple(s.name for s in profile_styles() if not s.searches_on_server)  # it cannot run Anthropic's server-side search

    @classmethod
    def default_model(cls) -> str:
        return settings.DEFAULT_MODEL

    def complete(self, system: str, messages: list[NeutralMessage], max_tokens: int, *, model: str = "") -> ProviderResponse:
        return self.create(messages_api_request(system, messages, max_tokens, model or self.default_model()), api=MESSAGES_API)

    def stream_or_cancel(self, request_kwargs: dict[str, Any], cancel: CancelSignal | None, on_text: TextSink, *,
                         api: str = MESSAGES_API) -> ProviderResponse:
        """The reply `create` gives, its text told to `on_text` a word at a time at the demo's pace."""
        response = self.create(request_kwargs, api=api)
        words = [w for b in response.content if b.get("type") == "text" for w in WORD.findall(b.get("text", ""))]
        pace = settings.DEMO_STREAM_WORDS_PER_SECOND
        if pace <= 0 or not words:
            return response
        interval = min(1 / pace, settings.DEMO_STREAM_MAX_SECONDS / len(words))
        stopped = threading.Event()
        started = time.monotonic()
        with cancel.while_running(stopped.set) if cancel is not None else nullcontext():
            for number, word in enumerate(words):
                # On a schedule from the start, not a pause after each word: time spent saving the
                # pieces (a busy database) does not stretch the reply past its cap.
                delay = max(started + number * interval - time.monotonic(), 0) if number else 0
                if delay and in_loop_run():
                    portal().wait(asyncio.sleep(delay), cancel=cancel)  # a run on the loop yields (raises CallCancelled)
                elif delay and stopped.wait(delay):
                    raise CallCancelled()
                if stopped.is_set():
                    raise CallCancelled()
                on_text(word)
        return response

    def create(self, request_kwargs: dict[str, Any], *, api: str = MESSAGES_API) -> ProviderResponse:
        self.check_api(api)
        return self._decide(request_kwargs)

    def _decide(self, request_kwargs: dict[str, Any]) -> ProviderResponse:
        """The demo agent's reply to a Messages API request (the OpenAI-wire demo hands it its bodies so read)."""
        messages: list[dict[str, Any]] = request_kwargs.get("messages", [])
        tools: list[dict[str, Any]] = [t for t in request_kwargs.get("tools", []) or [] if "name" in t]
        discovered = set(discovered_tool_names(messages))
        # What a model may call: non-deferred tools, and deferred ones a search loaded.
        callable_tools = {t["name"]: t for t in tools if not t.get("defer_loading") or t["name"] in discovered}
        start = self._person_message_index(messages)
        person_text = self._read_with_question(messages, start)
        run = messages[start + 1:] if start >= 0 else []
        calls = [b for m in run if m.get("role") == "assistant" for b in blocks_of(m) if b.get("type") == "tool_use"]
        results = {b.get("tool_use_id"): b for m in run if m.get("role") == "user" for b in blocks_of(m) if b.get("type") == "tool_result"}

        if calls and calls[-1].get("id") in results:
            last_call, last_result = calls[-1], results[calls[-1]["id"]]
            output = result_text(last_result)
            if len(calls) >= MAX_TOOL_CALLS_PER_RUN:
                return self._answer(request_kwargs, f"I stopped after {len(calls)} tool calls. Last result:\n{output}")
            if last_call["name"] == TOOL_SEARCH:
                return self._after_search(request_kwargs, person_text, last_result, callable_tools, calls)
            if last_result.get("is_error") and "select:" in output and TOOL_SEARCH in callable_tools:
                if not any(c["name"] == TOOL_SEARCH and c["input"].get("query") == f"select:{last_call['name']}" for c in calls):
                    return self._call(request_kwargs, TOOL_SEARCH, {"query": f"select:{last_call['name']}"},
                                      f"{last_call['name']} must be loaded first; selecting it with ToolSearch.")
            called = f"I called {last_call['name']} with {describe_arguments(last_call.get('input') or {})}"
            if last_result.get("is_error"):
                return self._answer(request_kwargs, f"{called}; it failed: {output}")
            return self._answer(request_kwargs, f"{called}. It returned:\n{output}")
        return self._first_step(request_kwargs, person_text, callable_tools)

    # -- steps ---------------------------------------------------------------------------------
    def _first_step(self, request_kwargs: dict[str, Any], text: str, callable_tools: dict[str, dict[str, Any]]) -> ProviderResponse:
        terms = request_terms(text)
        usable = [t for n, t in callable_tools.items() if n not in NOT_CALLABLE_BY_DEMO]
        # "What is 17 * 23?" has no search term, but a loaded tool computes it. Only a message that is
        # nothing but arithmetic: "my calendar for 2026-12-03" holds "2026-12-03" too.
        if arithmetic(text) and not [t for t in terms if t not in ARITHMETIC_WORDS]:
            calculator = next((t for t in usable if any(
                p.lower() in EXPRESSION_PROPERTY_NAMES for p in (t.get("input_schema") or {}).get("properties") or {})), None)
            if calculator is not None:
                return self._call_or_ask(request_kwargs, calculator, text, f"{calculator['name']} is loaded and computes this")
        if not terms:
            return self._answer(request_kwargs, "Ask me something a tool can answer, for example “what time is it in Tokyo?”.")
        # Best keyword fit first; among equals, a tool whose required arguments the message gives.
        # Whether a tool's arguments are in the message matters only between tools that fit at all.
        scores = [(tool_score(terms, t["name"], t.get("description", "")), t) for t in usable]
        scored = [(score, score > 0 and fillable(t, text), t) for score, t in scores]
        loaded_score, loaded_fills, best_loaded = max(scored, key=lambda s: s[:2], default=(0, False, None))
        deferred_score = max((tool_score(terms, n) for n in self._announced(request_kwargs)), default=0)
        # A loaded tool first: when its name is in the message and the message gives its arguments,
        # or when no deferred tool fits better (a tie included: no search is worth it).
        if best_loaded is not None and loaded_score > 0 and (
            (named_by(terms, best_loaded["name"]) and loaded_fills) or loaded_score >= deferred_score
        ):
            return self._call_or_ask(request_kwargs, best_loaded, text, f"{best_loaded['name']} is loaded and fits")
        query = " ".join(terms[:4])
        if TOOL_SEARCH in callable_tools:
            return self._call(request_kwargs, TOOL_SEARCH, {"query": query},
                              f"No loaded tool fits, so I am searching the deferred tools for “{query}”.")
        return self._answer(request_kwargs, "None of my tools fits that request.")

    def _after_search(self, request_kwargs: dict[str, Any], text: str, result: dict[str, Any],
                      callable_tools: dict[str, dict[str, Any]], calls: list[dict[str, Any]]) -> ProviderResponse:
        if result.get("is_error"):
            return self._answer(request_kwargs, f"ToolSearch failed: {result_text(result)}")
        called = {c["name"] for c in calls}
        found = [n for n in loaded_by(result) if n in callable_tools and n not in NOT_CALLABLE_BY_DEMO]
        matches = [n for n in found if n not in called]
        if not matches:
            return self._answer(request_kwargs, "ToolSearch found no tool I could use for that.")
        terms = request_terms(text)
        fitting = [callable_tools[n] for n in matches if tool_score(terms, n, callable_tools[n].get("description", "")) > 0]
        if not fitting:  # search ranks something first even for "hello"; a model would not call it
            return self._answer(request_kwargs, f"ToolSearch loaded {', '.join(matches)}, but none of them shares a word "
                                                "with your request, so I called none.")
        chosen = max(fitting, key=lambda t: (tool_score(terms, t["name"], t.get("description", "")), fillable(t, text)))
        return self._call_or_ask(request_kwargs, chosen, text, f"ToolSearch loaded {', '.join(matches)}; {chosen['name']} fits best")

    def _call_or_ask(self, request_kwargs: dict[str, Any], tool: dict[str, Any], text: str, why: str) -> ProviderResponse:
        """Call `tool` with arguments from the message, or ask for the required values it does not give."""
        schema = tool.get("input_schema") or {}
        arguments = fill_arguments(schema, text)
        lacking = missing(schema, arguments)
        if lacking:
            return self._answer(request_kwargs, f"{why}, but your message does not say its {describe_missing(schema, lacking)}. {ASKING}")
        return self._call(request_kwargs, tool["name"], arguments, f"{why}: calling it with {describe_arguments(arguments)}.")

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _person_message_index(messages: list[dict[str, Any]]) -> int:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            blocks = blocks_of(message)
            if message.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks) and _person_text(message).strip():
                return index
        return -1

    @classmethod
    def _read_with_question(cls, messages: list[dict[str, Any]], start: int) -> str:
        """The person's message; when it answers the agent's question for a missing value, the message
        that question was about comes first ("Convert New York time to Berlin" … "9am")."""
        if start < 0:
            return ""
        text = _person_text(messages[start])
        before = messages[start - 1] if start >= 1 else {}
        if before.get("role") == "assistant" and any(
            b.get("type") == "text" and b.get("text", "").endswith(ASKING) for b in blocks_of(before)
        ):
            earlier = cls._person_message_index(messages[:start - 1])
            if earlier >= 0:
                return f"{_person_text(messages[earlier])} {text}"
        return text

    @staticmethod
    def _announced(request_kwargs: dict[str, Any]) -> list[str]:
        """The deferred tools the request announced, read as the engine reads its announcements
        (system prompt, then the deltas in the history), in any layout: a grouped server line gives
        its tools' full names; a summary line is scored as it stands."""
        system = request_kwargs.get("system") or ""
        if isinstance(system, list):
            system = "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        # The full announcement follows the profile's own system prompt: read the block itself (the
        # engine reads a text that is an announcement, not one that holds one).
        opening, closing = system.find(FULL_OPEN), system.rfind(FULL_CLOSE)
        block = system[opening:closing + len(FULL_CLOSE)] if 0 <= opening < closing else ""
        lines = announced_lines([{"role": "user", "content": block}, *request_kwargs.get("messages", [])]) or {}
        names: list[str] = []
        for key, line in lines.items():
            head, separator, rest = line.partition(": ")
            if key.startswith(MCP_PREFIX) and separator and head == key:  # grouped: `mcp__server: a, b`
                names.extend(f"{key}__{short.strip()}" for short in rest.split(",") if short.strip())
            else:
                names.append(line)
        return names

    @staticmethod
    def _usage(request_kwargs: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        output = _ESTIMATE.count_text(json.dumps(content))
        if breakpoints_of(request_kwargs):
            with _PROMPT_CACHE_LOCK:
                model, now = _PROMPT_CACHES[request_ttl(request_kwargs)], time.monotonic()
                if len(model.entries) > _PRUNE_ABOVE:
                    model.prune(now)
                split = model.send(request_kwargs, now)
            return {"input": split.uncached_tokens, "output": output, "cache_read": split.cache_read_tokens,
                    "cache_write": split.cache_write_tokens}
        # No breakpoints: the cache model's blocks (a Messages API request's, the only kind it reads), nothing cached.
        return {"input": sum(b.tokens for b in prefix_blocks(request_kwargs, _ESTIMATE)), "output": output,
                "cache_read": 0, "cache_write": 0}

    def _call(self, request_kwargs: dict[str, Any], name: str, arguments: dict[str, Any], note: str) -> ProviderResponse:
        all_calls = sum(1 for m in request_kwargs.get("messages", []) if m.get("role") == "assistant"
                        for b in blocks_of(m) if b.get("type") == "tool_use")
        content = [text_block(note), {"type": "tool_use", "id": f"toolu_demo_{all_calls + 1:04d}", "name": name, "input": arguments}]
        return ProviderResponse(content=content, stop_reason="tool_use", usage=self._usage(request_kwargs, content),
                                model="offline-demo-agent", usage_source=USAGE_ESTIMATE)

    def _answer(self, request_kwargs: dict[str, Any], text: str) -> ProviderResponse:
        content = [text_block(text)]
        return ProviderResponse(content=content, stop_reason="end_turn", usage=self._usage(request_kwargs, content),
                                model="offline-demo-agent", usage_source=USAGE_ESTIMATE)
