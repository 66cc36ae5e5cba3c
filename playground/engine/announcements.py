"""Telling the model which deferred tools exist (names only): a full list, or deltas, in one of
three layouts.

Style (when and where):
- full: `<available-deferred-tools>` with every deferred tool, on every request (the request
  builder puts it in the system prompt; nothing is stored).
- delta: only what changed since the model was last told, reconstructed from the history: the
  announcement blocks already in user messages are replayed (a full list resets, a delta adds and
  removes). Nothing changed → no announcement. The history after a compaction boundary holds no
  announcement, so the first one after it is a full list again. The loop must keep the delta block
  in the stored user message (`RequestPlan.announcement_block`), or the next request repeats it.

Layout (how the names are written; every layout works with both styles):
- flat: one name per line (Claude Code's; the list grows with the catalog).
- grouped: one line per MCP server with its tools' short names (`mcp__github: create_issue, …`);
  other tools keep a line each. About 40 % shorter on real catalogs.
- budgeted: grouped while it fits a token budget; past it, one line per server with its tool count
  and the words its tool names use most, largest servers first, and a closing line for the servers
  left out. The header tells the model that `mcp__<server>` as a ToolSearch query lists a server's
  tools.

Each line has a key (its first word without a trailing colon: the tool name, the `mcp__server`
prefix, or `~other` / `~more`); deltas add (`+line`, replacing the line with the same key) and
remove (`-key`) lines. For the flat layout a line is a name, so its deltas are exactly Claude
Code's. Lines starting with `#` are explanations for the model and carry no key. Layout decisions
count tokens with the deterministic estimate (characters ÷ 2.5), so they never call an API.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from playground.engine.history import Message, blocks_of
from playground.engine.search.text import split_identifier
from playground.engine.tools import MCP_PREFIX, Tool, server_of

AnnouncementStyle = Literal["full", "delta"]
ANNOUNCEMENT_STYLES: tuple[str, ...] = ("full", "delta")
ANNOUNCEMENT_LAYOUTS: tuple[str, ...] = ("flat", "grouped", "budgeted")
DEFAULT_BUDGET_SHARE = 0.02  # budgeted layout: 2 % of the context window unless a profile says otherwise
MIN_BUDGET_TOKENS = 100  # the header, the tags and one summary line need about this much
DEFAULT_MAX_SHARE = 0.5
WARN_SHARE = 0.1  # "what the model sees" warns above this share of the window  # a flat or grouped list above half the window is never sent (budgeted instead)
FULL_OPEN, FULL_CLOSE = "<available-deferred-tools>", "</available-deferred-tools>"
DELTA_OPEN, DELTA_CLOSE = "<available-deferred-tools-changed>", "</available-deferred-tools-changed>"
OTHER_KEY, MORE_KEY = "~other", "~more"  # not valid tool names, so they never collide with one
GROUPED_HEADER = "# mcp__<server>: <tool>, … names the tools mcp__<server>__<tool>"
SUMMARY_HEADER = "# Servers (tool count): common words. ToolSearch query mcp__<server> lists a server's tools"
_CHARS_PER_TOKEN = 2.5  # the same estimate as tokens.CharEstimateCounter
_SUMMARY_WORDS = 5
# Verbs every server has say nothing about what a server is for.
_COMMON_VERBS = frozenset(
    "get list create update delete set add remove search find read write run fetch query make new "
    "edit put post patch send check do by all for to of the a an and or in on with".split()
)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Announcement:
    kind: Literal["full", "delta"]
    text: str
    names: tuple[str, ...] = ()  # full: every deferred name it covers
    added: tuple[str, ...] = ()  # delta: lines added or replaced (names, for the flat layout)
    removed: tuple[str, ...] = ()  # delta: keys removed (names, for the flat layout)
    layout: str = "flat"  # the layout actually used
    reason: str = ""  # why the layout differs from the one asked for, if it does

    def to_block(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "names": list(self.names),
            "added": list(self.added),
            "removed": list(self.removed),
            "layout": self.layout,
            "reason": self.reason,
        }


def line_key(line: str) -> str:
    head = line.split(" ", 1)[0]
    return head[:-1] if head.endswith(":") else head


def flat_lines(names: Sequence[str]) -> list[str]:
    return list(names)


def _by_server(names: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(names that belong to no MCP server, {server: [short names]}) in order of first appearance."""
    loose: list[str] = []
    servers: dict[str, list[str]] = {}
    for name in names:
        server = server_of(name)
        if server is None:
            loose.append(name)
        else:
            servers.setdefault(server, []).append(name[len(MCP_PREFIX) + len(server) + 2:])
    return loose, servers


def grouped_lines(names: Sequence[str]) -> list[str]:
    loose, servers = _by_server(names)
    return loose + [f"{MCP_PREFIX}{server}: {', '.join(short)}" for server, short in servers.items()]


def _common_words(short_names: Iterable[str]) -> list[str]:
    """The words a server's tool names use most: names split as search splits them (an acronym is one
    word: `API-post-page` → api, post, page), without verbs, numbers and one-letter scraps."""
    counts: Counter[str] = Counter()
    for short in short_names:
        # Each word once per name, in the name's order (not a set's): ties keep the order words first
        # appear in, so the announcement is the same text in every process (and its prompt cache holds).
        counts.update(list(dict.fromkeys(w for w in split_identifier(short)
                                         if len(w) > 1 and not w.isdigit() and w not in _COMMON_VERBS)))
    return [word for word, _ in counts.most_common(_SUMMARY_WORDS)]


def summary_lines(names: Sequence[str]) -> list[str]:
    """One line per server (largest first) and one for the tools of no server."""
    loose, servers = _by_server(names)
    lines = []
    for server, short in sorted(servers.items(), key=lambda item: -len(item[1])):
        words = _common_words(short)
        lines.append(f"{MCP_PREFIX}{server} ({len(short)} tools): {', '.join(words)}" if words else f"{MCP_PREFIX}{server} ({len(short)} tools)")
    if loose:
        lines.append(f"{OTHER_KEY} ({len(loose)} tools not from an MCP server): {', '.join(loose[:_SUMMARY_WORDS])}")
    return lines


def _render_full(lines: Sequence[str], header: str = "") -> str:
    body = ([header] if header and lines else []) + list(lines)
    return f"{FULL_OPEN}\n" + "".join(f"{line}\n" for line in body) + FULL_CLOSE


def budgeted_lines(names: Sequence[str], budget_tokens: int) -> tuple[list[str], str]:
    """(lines, header) whose full announcement stays within the budget: grouped if that fits,
    otherwise server summaries, largest servers first, and a `~more` line for the rest."""
    grouped = grouped_lines(names)
    if estimate_tokens(_render_full(grouped, GROUPED_HEADER)) <= budget_tokens:
        return grouped, GROUPED_HEADER
    summaries = summary_lines(names)
    counts = [int(line.split("(", 1)[1].split(" ", 1)[0]) for line in summaries]
    spent = estimate_tokens(_render_full([], SUMMARY_HEADER)) + estimate_tokens(SUMMARY_HEADER)
    kept: list[str] = []
    for line in summaries:
        more = _more_line(summaries[len(kept) + 1:], counts[len(kept) + 1:])
        if spent + estimate_tokens(line + "\n") + estimate_tokens(more + "\n") > budget_tokens:
            break
        kept.append(line)
        spent += estimate_tokens(line + "\n")
    rest = summaries[len(kept):]
    if rest:
        kept.append(_more_line(rest, counts[len(kept):]))
    # The per-line sums round up, so the whole text can only be at or under them; check anyway.
    while len(kept) > 1 and estimate_tokens(_render_full(kept, SUMMARY_HEADER)) > budget_tokens:
        dropped = kept.pop(-2)
        rest = [dropped] + rest
        kept[-1] = _more_line(rest, [int(line.split("(", 1)[1].split(" ", 1)[0]) for line in rest])
    return kept, SUMMARY_HEADER


def _more_line(rest: Sequence[str], counts: Sequence[int]) -> str:
    if not rest:
        return ""
    return f"{MORE_KEY} ({sum(counts)} tools in {len(rest)} more groups not listed): ToolSearch finds them"


def layout_lines(
    names: Sequence[str], layout: str, *, budget_tokens: int | None = None, max_tokens: int | None = None
) -> tuple[list[str], str, str, str]:
    """(lines, header, layout used, reason). A flat or grouped list above `max_tokens` becomes
    budgeted, and the reason says so."""
    if layout not in ANNOUNCEMENT_LAYOUTS:
        raise ValueError(f"unknown announcement layout {layout!r} (expected flat, grouped or budgeted)")
    if layout == "budgeted":
        if budget_tokens is None or budget_tokens < MIN_BUDGET_TOKENS:
            raise ValueError(f"the budgeted layout needs a token budget of at least {MIN_BUDGET_TOKENS}")
        lines, header = budgeted_lines(names, budget_tokens)
        return lines, header, "budgeted", ""
    lines, header = (flat_lines(names), "") if layout == "flat" else (grouped_lines(names), GROUPED_HEADER)
    if max_tokens is not None and names:
        tokens = estimate_tokens(_render_full(lines, header))
        if tokens > max_tokens:
            budget = budget_tokens if budget_tokens and budget_tokens < max_tokens else max_tokens
            lines, header = budgeted_lines(names, budget)
            reason = (
                f"the {layout} list of {len(names):,} tools is about {tokens:,} tokens, more than the "
                f"{max_tokens:,} allowed; the budgeted layout ({budget:,} tokens at most) was sent instead"
            )
            return lines, header, "budgeted", reason
    return lines, header, layout, ""


def full_announcement(names: Sequence[str], lines: Sequence[str] | None = None, header: str = "", layout: str = "flat", reason: str = "") -> Announcement:
    lines = list(names) if lines is None else list(lines)
    if not lines:
        return Announcement("full", f"{FULL_OPEN}\n{FULL_CLOSE}", names=tuple(names), layout=layout, reason=reason)
    return Announcement("full", _render_full(lines, header), names=tuple(names), layout=layout, reason=reason)


def delta_announcement(added: Sequence[str], removed: Sequence[str], layout: str = "flat", reason: str = "") -> Announcement:
    lines = [f"+{n}" for n in added] + [f"-{n}" for n in removed]
    text = f"{DELTA_OPEN}\n" + "\n".join(lines) + f"\n{DELTA_CLOSE}"
    return Announcement("delta", text, added=tuple(added), removed=tuple(removed), layout=layout, reason=reason)


def _body(text: str, opening: str, closing: str) -> list[str] | None:
    stripped = text.strip()
    if not (stripped.startswith(opening) and stripped.endswith(closing)):
        return None
    inner = stripped[len(opening): len(stripped) - len(closing)]
    return [line.strip() for line in inner.splitlines() if line.strip() and not line.strip().startswith("#")]


def announced_lines(messages: Sequence[Message]) -> dict[str, str] | None:
    """What the history has told the model so far, {key: line} (replaying announcements), or None."""
    announced: dict[str, str] | None = None
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in blocks_of(message):
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                continue
            full = _body(block["text"], FULL_OPEN, FULL_CLOSE)
            if full is not None:
                announced = {line_key(line): line for line in full}
                continue
            delta = _body(block["text"], DELTA_OPEN, DELTA_CLOSE)
            if delta is not None:
                announced = {} if announced is None else announced
                for line in delta:
                    if line.startswith("+"):
                        announced[line_key(line[1:])] = line[1:]
                    elif line.startswith("-"):
                        announced.pop(line[1:], None)
    return announced


def announced_names(messages: Sequence[Message]) -> list[str] | None:
    """The keys announced so far (for the flat layout: the tool names), or None if nothing."""
    announced = announced_lines(messages)
    return None if announced is None else list(announced)


def announce(
    deferred: Iterable[str | Tool],
    messages: Sequence[Message],
    style: str,
    *,
    layout: str = "flat",
    budget_tokens: int | None = None,
    max_tokens: int | None = None,
) -> Announcement | None:
    """The announcement for this request, or None when a delta has nothing to say."""
    if style not in ANNOUNCEMENT_STYLES:
        raise ValueError(f"unknown announcement style {style!r} (expected full or delta)")
    names = list(dict.fromkeys(t.name if isinstance(t, Tool) else t for t in deferred))
    lines, header, used, reason = layout_lines(names, layout, budget_tokens=budget_tokens, max_tokens=max_tokens)
    if style == "full":
        return full_announcement(names, lines, header, used, reason)
    before = announced_lines(messages)
    if before is None:
        return full_announcement(names, lines, header, used, reason)
    now = {line_key(line): line for line in lines}
    added = [line for key, line in now.items() if before.get(key) != line]
    removed = [key for key in before if key not in now]
    if not added and not removed:
        return None
    return delta_announcement(added, removed, used, reason)
