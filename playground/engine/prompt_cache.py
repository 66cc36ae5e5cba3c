"""Prompt caching: where a request's cache breakpoints go, and what a conversation's requests cost.

Two halves (checked facts: ../shared/reference/prompt-caching.md):

- `with_cache_breakpoints(request, ttl)`: the wire builders' last step when a profile caches. It
  marks `cache_control` where Anthropic's docs and real agents place it: the last tool that is part
  of the prefix (a `defer_loading` tool is not), the end of the system prompt, and the conversation's
  tail (the last block of the last message). Three of the four breakpoints a request may carry.
- `AnthropicCacheModel` / `OpenAICacheModel`: given a conversation's requests in order, with their
  times, which prefix of each one an earlier request left in the cache, so each turn's uncached,
  cache-written and cache-read input tokens, and the first block where the request differs from the
  previous one, with the reason ("tools array changed: mcp__x discovered").

A request is split into prefix blocks in the order the API caches it, tools → system → messages:
one per tool sent in the prefix (deferred tools, `defer_loading: true`, are not in it), one per
system text block, one per message content block. A block's key digests its content without
`cache_control` (a breakpoint does not change what is cached) after the key of the block before it;
a `tool_reference` block costs the definition it expands to. A cache model works out only the
blocks that changed since its previous request (`BlockMemo`).
"""
from __future__ import annotations

import hashlib
import json
import marshal
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from playground.engine.history import TOOL_ADDITION, TOOL_REMOVAL, changed_tool_name
from playground.engine.pricing import DEFAULT_TTL, LONG_TTL, Usage
from playground.engine.tokens import CharEstimateCounter, TokenCounter, count_messages

CACHE_TTLS: dict[str, int] = {DEFAULT_TTL: 300, LONG_TTL: 3600}  # seconds an entry lives after its last use
MAX_BREAKPOINTS = 4
# At a breakpoint the API also looks for a cache entry at up to this many blocks before it.
LOOKBACK_BLOCKS = 20
# Anthropic's minimum cacheable prefix per model (id prefix → tokens; the longest matching key
# wins; a model not listed gets DEFAULT_MIN_CACHEABLE). A shorter prefix is not cached, silently.
# Prompt-caching page as quoted in anthropics/anthropic-sdk-python#1194, read 2026-12-05; the
# Opus 4.7 / 4.8 / 5 and Sonnet 5 rows from a secondary source of the same date (check the page).
MIN_CACHEABLE_AS_OF = "2026-12-05"
ANTHROPIC_MIN_CACHEABLE: dict[str, int] = {
    "claude-opus-5": 512,
    "claude-opus-4-8": 1024,
    "claude-opus-4-7": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-haiku-3-5": 2048,
    "claude-3-haiku": 2048,
}
DEFAULT_MIN_CACHEABLE = 1024
# OpenAI caches automatically: prompts of at least 1,024 tokens, the cached part growing in steps
# of 128 tokens (OpenAI's prompt-caching guide).
OPENAI_MIN_CACHED = 1024
OPENAI_CACHE_STEP = 128
SECTIONS = ("tools", "system", "messages")


def check_ttl(ttl: str) -> str:
    if ttl not in CACHE_TTLS:
        raise ValueError(f"unknown prompt cache TTL {ttl!r} (expected {' or '.join(CACHE_TTLS)})")
    return ttl


def cache_control(ttl: str = DEFAULT_TTL) -> dict[str, str]:
    """The breakpoint marker; the 5-minute TTL is the API's default and goes without a `ttl` field."""
    check_ttl(ttl)
    return {"type": "ephemeral"} if ttl == DEFAULT_TTL else {"type": "ephemeral", "ttl": ttl}


def min_cacheable_tokens(model: str) -> int:
    model = (model or "").strip().lower()
    best = max((key for key in ANTHROPIC_MIN_CACHEABLE if model.startswith(key)), key=len, default="")
    return ANTHROPIC_MIN_CACHEABLE[best] if best else DEFAULT_MIN_CACHEABLE


# -- breakpoints ----------------------------------------------------------------------------------------
def with_cache_breakpoints(request: dict[str, Any], ttl: str = DEFAULT_TTL) -> dict[str, Any]:
    """A copy of a Messages API request with `cache_control` at the end of the tools prefix, the end of
    the system prompt (turned into text blocks) and the conversation's tail. Only the parts it marks
    are copied: the plan's tools and messages stay as they were."""
    marker = cache_control(ttl)
    marked = dict(request)
    tools = list(request.get("tools") or [])
    in_prefix = [i for i, tool in enumerate(tools) if not tool.get("defer_loading")]
    if in_prefix:
        tools[in_prefix[-1]] = {**tools[in_prefix[-1]], "cache_control": marker}
        marked["tools"] = tools
    system = request.get("system")
    if system:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else [dict(b) for b in system]
        blocks[-1] = {**blocks[-1], "cache_control": marker}
        marked["system"] = blocks
    messages = list(request.get("messages") or [])
    if messages:
        last = messages[-1]
        content = last.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        # Thinking blocks and empty text cannot carry a breakpoint: mark the last block that can.
        for position in range(len(blocks) - 1, -1, -1):
            block = blocks[position]
            if block.get("type") in ("thinking", "redacted_thinking") or (block.get("type") == "text" and not block.get("text")):
                continue
            blocks[position] = {**block, "cache_control": marker}
            messages[-1] = {**last, "content": blocks}
            marked["messages"] = messages
            break
    return marked


def request_ttl(request: dict[str, Any]) -> str:
    """The TTL a request's breakpoints ask for: "1h" when any does, else the default."""
    found = json.dumps([request.get("tools"), request.get("system"), request.get("messages")], default=str)
    return "1h" if '"ttl": "1h"' in found else DEFAULT_TTL


def breakpoints_of(request: dict[str, Any]) -> list[str]:
    """Where a request's breakpoints are, for the request view: "tools: NAME", "system", "messages[i]"."""
    found = [f"tools: {t.get('name', '?')}" for t in request.get("tools") or [] if t.get("cache_control")]
    system = request.get("system")
    if isinstance(system, list) and any(b.get("cache_control") for b in system):
        found.append("system")
    for index, message in enumerate(request.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("cache_control") for b in content):
            found.append(f"messages[{index}] ({message.get('role', '?')})")
    return found


# -- prefix blocks --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrefixBlock:
    section: str  # tools | system | messages
    label: str  # what the block is, for a reason: a tool's name, "system", "messages[3] (user)"
    key: str  # the cumulative digest of the prefix up to and including this block
    tokens: int
    breakpoint: bool


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _tool_references(value: Any) -> Iterable[str]:
    """The tools a block expands to: a search result's `tool_reference`s and a harness's
    `tool_addition`s (the tool-changes style: the added definition is read where the addition sits,
    the `tools` array, and so the cached prefix, never changing). A `tool_removal` expands to nothing."""
    if isinstance(value, dict):
        if value.get("type") == "tool_reference" and isinstance(value.get("tool_name"), str):
            yield value["tool_name"]
        if value.get("type") == TOOL_ADDITION:
            name = changed_tool_name(value)
            if name:
                yield name
            return
        if value.get("type") == TOOL_REMOVAL:
            return
        for item in value.values():
            yield from _tool_references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _tool_references(item)


@dataclass(frozen=True)
class _BlockFacts:
    """What one block's content gives, whatever comes before it: the digest of what it caches as,
    its own tokens, whether it carries a breakpoint, and the tools it references (a message block's
    `tool_reference`s cost the definitions they expand to, looked up in the request it is in)."""

    digest: bytes
    tokens: int
    breakpoint: bool
    references: tuple[str, ...] = ()


# The tools sections of the process's latest distinct tools arrays, by counter and the array's exact
# content: a conversation's first request (a new model) finds its catalog's blocks made by another's.
_SHARED_TOOLS: OrderedDict[tuple[Any, bytes], tuple[bytes, tuple[PrefixBlock, ...], Any, dict[bytes, _BlockFacts]]] = OrderedDict()
_SHARED_TOOLS_KEPT = 8
_SHARED_LOCK = threading.Lock()


class BlockMemo:
    """A cache model's memory of the previous request's blocks, by their exact content.

    A conversation's next request repeats almost all of the previous one (the same tools, the same
    history plus a turn), and the all-tools baseline repeats every tool: a block whose content is
    exactly one of the previous request's is not canonicalised, serialised or counted again. Exact
    means the same marshalled bytes (version 0: no sharing of repeated objects), so the same types
    (1, 1.0 and True differ), the same keys in the same order and the same values; anything marshal
    cannot write is worked out every time. Only the blocks of the latest request are kept, so a
    long-lived model stays the size of one request's digests. Bound to the counter it counted with.
    """

    def __init__(self) -> None:
        self._previous: dict[bytes, _BlockFacts] = {}
        self._current: dict[bytes, _BlockFacts] = {}
        self.counter: TokenCounter | None = None
        self.worked_out = 0  # blocks whose facts were computed (not found): what the tests count
        # The last request's whole tools array: its key, its blocks, the chain after them and the
        # tools' facts. Tools come first, so an identical array gives identical blocks and keys.
        self._tools: tuple[bytes, tuple[PrefixBlock, ...], Any, dict[bytes, _BlockFacts]] | None = None

    def begin(self, counter: TokenCounter) -> None:
        """A new request: what the last one used becomes what this one may find."""
        if counter is not self.counter:
            self._current, self.counter, self._tools = {}, counter, None
        self._previous, self._current = self._current, {}

    def tools_section(self, key: bytes | None) -> tuple[tuple[PrefixBlock, ...], Any] | None:
        """The blocks and chain of a tools array identical to the last request's, or to one another
        model of this process counted with the same counter (every conversation's all-tools baseline
        sends the same catalog), its tools' facts carried over for the next request; or None."""
        if key is None:
            return None
        if self._tools is None or self._tools[0] != key:
            with _SHARED_LOCK:
                shared = _SHARED_TOOLS.get((self.counter, key))
                if shared is None:
                    return None
                _SHARED_TOOLS.move_to_end((self.counter, key))
            self._tools = shared
        self._current.update(self._tools[3])
        return self._tools[1], self._tools[2].copy()

    def keep_tools_section(self, key: bytes | None, blocks: Sequence[PrefixBlock], chain: Any) -> None:
        """Remember this request's tools array (called right after its tools: `_current` holds them)."""
        if key is None:
            self._tools = None
            return
        self._tools = (key, tuple(blocks), chain.copy(), dict(self._current))
        with _SHARED_LOCK:
            _SHARED_TOOLS[(self.counter, key)] = self._tools
            while len(_SHARED_TOOLS) > _SHARED_TOOLS_KEPT:
                _SHARED_TOOLS.popitem(last=False)


    def facts(self, section: str, content: Any, make: Callable[[], _BlockFacts]) -> _BlockFacts:
        key = _content_key(section, content)
        found = None if key is None else self._current.get(key) or self._previous.get(key)
        if found is None:
            found = make()
            self.worked_out += 1
        if key is not None:
            self._current[key] = found
        return found


def _content_key(section: str, content: Any) -> bytes | None:
    try:
        written = marshal.dumps(content, 0)
    except ValueError:  # an object marshal does not write (json.dumps would str() it): no memo
        return None
    return hashlib.blake2b(written, digest_size=20, person=section.encode()[:16]).digest()


def _digest(section: str, content: Any) -> bytes:
    return hashlib.sha256(json.dumps([section, content], sort_keys=True, default=str).encode()).digest()


def prefix_blocks(request: dict[str, Any], counter: TokenCounter | None = None,
                  memo: BlockMemo | None = None) -> list[PrefixBlock]:
    """The request's blocks in cache order (tools → system → messages) with cumulative keys (a block's
    key digests its own content's digest after the key before it). With the `memo` of the previous
    request (a cache model's), only the blocks that changed since are worked out."""
    counter = counter or CharEstimateCounter()
    memo = memo if memo is not None else BlockMemo()
    memo.begin(counter)
    tools = list(request.get("tools") or [])
    definitions = {t.get("name"): t for t in tools}
    chain = hashlib.sha256()
    blocks: list[PrefixBlock] = []

    def add(section: str, label: str, facts: _BlockFacts, tokens: int) -> None:
        chain.update(facts.digest)
        blocks.append(PrefixBlock(section, label, chain.hexdigest(), tokens, facts.breakpoint))

    def tool_facts(tool: dict[str, Any]) -> _BlockFacts:
        def make() -> _BlockFacts:
            canonical = _canonical(tool)
            return _BlockFacts(_digest("tools", canonical), counter.count_tools([canonical]), _has_breakpoint(tool))
        return memo.facts("tools", tool, make)

    def system_facts(block: dict[str, Any]) -> _BlockFacts:
        return memo.facts("system", block, lambda: _BlockFacts(
            _digest("system", _canonical(block)), counter.count_text(str(block.get("text", ""))), _has_breakpoint(block)))

    def message_facts(content: dict[str, Any]) -> _BlockFacts:
        def make() -> _BlockFacts:
            block = content["block"]
            return _BlockFacts(_digest("messages", _canonical(content)), count_messages(counter, [_canonical(block)]),
                               _has_breakpoint(content), tuple(_tool_references(block)))
        return memo.facts("messages", content, make)

    whole = _content_key("tools array", tools)  # one marshal of the array: most turns repeat it exactly
    repeated = memo.tools_section(whole)
    if repeated is not None:
        blocks.extend(repeated[0])
        chain = repeated[1]
    else:
        for tool in tools:
            if tool.get("defer_loading"):
                continue  # deferred definitions are not in the prefix (and cost nothing until referenced)
            facts = tool_facts(tool)
            add("tools", str(tool.get("name", "?")), facts, facts.tokens)
        memo.keep_tools_section(whole, blocks, chain)
    system = request.get("system")
    if system:
        for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
            facts = system_facts(block)
            add("system", "system prompt", facts, facts.tokens)
    for index, message in enumerate(request.get("messages") or []):
        content = message.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            facts = message_facts({"role": message.get("role"), "block": block})
            expanded = sum(tool_facts(definitions[name]).tokens for name in facts.references if name in definitions)
            add("messages", f"messages[{index}] ({message.get('role', '?')})", facts, facts.tokens + expanded)
    return blocks


def openai_prefix_blocks(body: dict[str, Any], counter: TokenCounter | None = None,
                         memo: BlockMemo | None = None) -> list[PrefixBlock]:
    """An OpenAI request body (Responses or Chat Completions) in the order its prompt is cached: the
    tools as the model sees them before a search (a deferred namespace or function by name and
    description only), the instructions, then each input item or message (a `tool_search_output`
    costs the definitions it loads). `memo` as for `prefix_blocks`."""
    counter = counter or CharEstimateCounter()
    memo = memo if memo is not None else BlockMemo()
    memo.begin(counter)
    chain = hashlib.sha256()
    blocks: list[PrefixBlock] = []

    def add(section: str, label: str, content: Any, tokens: Callable[[], int]) -> None:
        facts = memo.facts(section, content, lambda: _BlockFacts(_digest(section, content), tokens(), False))
        chain.update(facts.digest)
        blocks.append(PrefixBlock(section, label, chain.hexdigest(), facts.tokens, False))

    def item_tokens(item: dict[str, Any]) -> int:
        loaded = item.get("tools") if item.get("type") == "tool_search_output" else None
        rest = {k: v for k, v in item.items() if k != "tools"} if loaded else item
        return (counter.count_tools(loaded) if loaded else 0) + count_messages(counter, rest)

    for tool in body.get("tools") or []:
        seen = _openai_visible_tool(tool)
        add("tools", _tool_name(tool), seen, lambda seen=seen: counter.count_tools([seen]))
    if body.get("instructions"):
        add("system", "instructions", body["instructions"], lambda: counter.count_text(str(body["instructions"])))
    items = body.get("input") if "input" in body else body.get("messages")
    for index, item in enumerate([{"role": "user", "content": items}] if isinstance(items, str) else items or []):
        role = item.get("role") or item.get("type", "item")
        section = "system" if role in ("system", "developer") and not any(b.section == "messages" for b in blocks) else "messages"
        add(section, f"{'input' if 'input' in body else 'messages'}[{index}] ({role})", item,
            lambda item=item: item_tokens(item))
    return blocks


def _openai_visible_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") == "namespace" and all(t.get("defer_loading") for t in tool.get("tools", [])):
        return {"type": "namespace", "name": tool.get("name"), "description": tool.get("description", "")}
    if tool.get("defer_loading"):
        return {"type": tool.get("type"), "name": tool.get("name"), "description": tool.get("description", "")}
    return tool


def _tool_name(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, dict):
        return str(function.get("name", "?"))
    return str(tool.get("name") or tool.get("type") or "?")


def _has_breakpoint(content: Any) -> bool:
    if isinstance(content, dict):
        if content.get("cache_control"):
            return True
        block = content.get("block")
        return isinstance(block, dict) and bool(block.get("cache_control"))
    return False


# -- where a request differs from the previous one ------------------------------------------------------
@dataclass(frozen=True)
class PrefixBreak:
    section: str  # tools | system | messages
    index: int  # the first differing prefix block
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"section": self.section, "index": self.index, "reason": self.reason}


def _prefix_tool_names(request: dict[str, Any]) -> list[str]:
    """The tools in the prefix: full definitions (a namespace with a function no longer deferred by
    that function's name)."""
    names = []
    for tool in request.get("tools") or []:
        if tool.get("type") == "namespace":
            names += [f"{tool.get('name')}.{t.get('name')}" for t in tool.get("tools", []) if not t.get("defer_loading")]
        elif not tool.get("defer_loading"):
            names.append(_tool_name(tool))
    return names


def prefix_break(previous: dict[str, Any] | None, current: dict[str, Any], counter: TokenCounter | None = None,
                 *, previous_blocks: Sequence[PrefixBlock] | None = None,
                 current_blocks: Sequence[PrefixBlock] | None = None) -> PrefixBreak | None:
    """The first block where `current` stops repeating `previous` (None: it extends it, or there is
    no previous request), and why, in words a page can show."""
    if previous is None:
        return None
    memo = BlockMemo()  # what the two requests share is worked out once
    old = list(previous_blocks if previous_blocks is not None else prefix_blocks(previous, counter, memo))
    new = list(current_blocks if current_blocks is not None else prefix_blocks(current, counter, memo))
    return _first_difference(previous, current, old, new)


def _first_difference(previous: dict[str, Any], current: dict[str, Any], old: Sequence[PrefixBlock],
                      new: Sequence[PrefixBlock]) -> PrefixBreak | None:
    index = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a.key != b.key), None)
    if index is None:
        if len(new) >= len(old):
            return None
        index = len(new)  # the new request is shorter: what followed was dropped
    section = new[index].section if index < len(new) else old[index].section
    return PrefixBreak(section, index, _reason(section, previous, current, old, new, index))


def _reason(section: str, previous: dict[str, Any], current: dict[str, Any], old: Sequence[PrefixBlock],
            new: Sequence[PrefixBlock], index: int) -> str:
    if section == "tools" or (index < len(old) and old[index].section == "tools"):
        before, after = _prefix_tool_names(previous), _prefix_tool_names(current)
        added = [n for n in after if n not in before]
        removed = [n for n in before if n not in after]
        parts = []
        if added:
            parts.append(f"{', '.join(added)} discovered" if len(added) < 4 else f"{len(added)} tools added ({added[0]}, …)")
        if removed:
            parts.append(f"{', '.join(removed)} removed")
        if not parts:
            label = new[index].label if index < len(new) else old[index].label
            parts.append(f"{label} changed")
        return f"tools array changed: {'; '.join(parts)}"
    if section == "system":
        return "system prompt changed (e.g. the announcement of deferred tools)"
    label = new[index].label if index < len(new) else old[index].label
    return f"conversation changed at {label} (history rewritten or compacted)"


# -- the cache models -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnCache:
    """One request's input tokens, split as the API bills them."""

    turn: int
    input_tokens: int  # the whole prompt: uncached + written + read
    cache_write_tokens: int
    cache_read_tokens: int
    prefix_break: PrefixBreak | None = None

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_write_tokens - self.cache_read_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "input_tokens": self.input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "uncached_tokens": self.uncached_tokens,
            "prefix_break": self.prefix_break.section if self.prefix_break else None,
        }


@dataclass
class _CacheModel:
    ttl: str = DEFAULT_TTL
    counter: TokenCounter = field(default_factory=CharEstimateCounter)
    vendor: str = "anthropic"  # the request shape: "anthropic" (Messages API) or "openai"
    entries: dict[str, float] = field(default_factory=dict)  # prefix key → expiry (seconds)
    _previous: dict[str, Any] | None = None
    _previous_blocks: list[PrefixBlock] = field(default_factory=list)
    _turn: int = 0
    memo: BlockMemo = field(default_factory=BlockMemo)  # the previous request's blocks: only changes are worked out

    def __post_init__(self) -> None:
        check_ttl(self.ttl)

    @property
    def ttl_seconds(self) -> int:
        return CACHE_TTLS[self.ttl]

    def prune(self, at: float) -> None:
        """Forget expired entries (a long-lived model, e.g. one per process, stays small)."""
        self.entries = {key: expiry for key, expiry in self.entries.items() if expiry >= at}

    def _live(self, key: str, at: float) -> bool:
        expiry = self.entries.get(key)
        return expiry is not None and expiry >= at

    def blocks(self, request: dict[str, Any]) -> list[PrefixBlock]:
        """The request's prefix blocks in its vendor's shape (Messages API, or Responses / Chat Completions)."""
        if self.vendor == "openai":
            return openai_prefix_blocks(request, self.counter, self.memo)
        return prefix_blocks(request, self.counter, self.memo)

    def send(self, request: dict[str, Any], at: float = 0.0) -> TurnCache:
        """Account one request sent at `at` (seconds, non-decreasing) and remember what it cached."""
        blocks = self.blocks(request)
        broke = None if self._previous is None else _first_difference(self._previous, request, self._previous_blocks, blocks)
        self._turn += 1
        read, write = self._split(request, blocks, at)
        self._previous, self._previous_blocks = request, blocks
        return TurnCache(self._turn, sum(b.tokens for b in blocks), write, read, broke)

    def _split(self, request: dict[str, Any], blocks: list[PrefixBlock], at: float) -> tuple[int, int]:
        raise NotImplementedError


CachingModel = _CacheModel  # the public name of the cache models' base (feed it requests with `send`)


class AnthropicCacheModel(_CacheModel):
    """Explicit breakpoints: at each `cache_control` the API reads the longest cached prefix ending
    at the breakpoint or up to LOOKBACK_BLOCKS blocks before it, and writes the prefix up to the last
    breakpoint that reaches the model's minimum cacheable length. A hit refreshes the entry's TTL."""

    def _split(self, request: dict[str, Any], blocks: list[PrefixBlock], at: float) -> tuple[int, int]:
        minimum = min_cacheable_tokens(str(request.get("model", "")))
        cumulative, total = [], 0
        for block in blocks:
            total += block.tokens
            cumulative.append(total)
        breakpoints = [i for i, block in enumerate(blocks) if block.breakpoint][:MAX_BREAKPOINTS]
        hit = -1
        for point in breakpoints:
            for i in range(point, max(-1, point - LOOKBACK_BLOCKS - 1), -1):
                if i > hit and self._live(blocks[i].key, at):
                    hit = i
                    break
        read = cumulative[hit] if hit >= 0 else 0
        if hit >= 0:
            self.entries[blocks[hit].key] = at + self.ttl_seconds
        cached_points = [p for p in breakpoints if cumulative[p] >= minimum]
        write = 0
        if cached_points and cached_points[-1] > hit:
            write = cumulative[cached_points[-1]] - read
        for point in cached_points:
            self.entries[blocks[point].key] = at + self.ttl_seconds
        return read, write


class OpenAICacheModel(_CacheModel):
    """Automatic: the longest prefix an earlier request (within the TTL) shares, once the prompt is at
    least OPENAI_MIN_CACHED tokens, counted in OPENAI_CACHE_STEP steps above that; no write charge.
    Every prefix of a request of that length is remembered, no breakpoints needed."""

    def _split(self, request: dict[str, Any], blocks: list[PrefixBlock], at: float) -> tuple[int, int]:
        total = sum(b.tokens for b in blocks)
        matched, cumulative = 0, 0
        for block in blocks:
            cumulative += block.tokens
            if not self._live(block.key, at):
                break
            matched = cumulative
        if total >= OPENAI_MIN_CACHED:
            for block in blocks:
                self.entries[block.key] = at + self.ttl_seconds
        if matched < OPENAI_MIN_CACHED:
            return 0, 0
        return OPENAI_MIN_CACHED + (matched - OPENAI_MIN_CACHED) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP, 0


class UncachedModel(_CacheModel):
    """Caching off: every input token is uncached (prefix breaks are still reported)."""

    def _split(self, request: dict[str, Any], blocks: list[PrefixBlock], at: float) -> tuple[int, int]:
        return 0, 0


def reported_split(vendor: str, usage: dict[str, Any] | None) -> dict[str, int] | None:
    """An API's reported usage as the cache model's split, or None when it reported no input. Usage is
    stored in the loop's one accounting for both vendors (`input` the uncached part, `cache_read` and
    `cache_write` beside it: the OpenAI provider takes its cached tokens out of `input_tokens`), so the
    vendor only names whose figures these are."""
    counted = Usage.of(usage)
    if not counted.input_total:
        return None
    return {"input_tokens": counted.input_total, "cache_write_tokens": counted.cache_write,
            "cache_read_tokens": counted.cache_read, "uncached_tokens": counted.uncached}


def cache_model(vendor: str, *, ttl: str = DEFAULT_TTL, enabled: bool = True,
                counter: TokenCounter | None = None) -> _CacheModel:
    """The model for a vendor ("anthropic" or "openai"); `enabled=False`: nothing cached."""
    counter = counter or CharEstimateCounter()
    if vendor not in ("anthropic", "openai"):
        raise ValueError(f"unknown vendor {vendor!r} (anthropic or openai)")
    if not enabled:
        return UncachedModel(ttl=ttl, counter=counter, vendor=vendor)
    if vendor == "anthropic":
        return AnthropicCacheModel(ttl=ttl, counter=counter)
    return OpenAICacheModel(ttl=ttl, counter=counter, vendor="openai")


def account(requests: Sequence[tuple[float, dict[str, Any]]], vendor: str = "anthropic", *, ttl: str = DEFAULT_TTL,
            enabled: bool = True, counter: TokenCounter | None = None) -> list[TurnCache]:
    """Each request's split, for a conversation's (time in seconds, request) pairs in order."""
    model = cache_model(vendor, ttl=ttl, enabled=enabled, counter=counter)
    return [model.send(request, at) for at, request in requests]
