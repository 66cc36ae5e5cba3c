"""Telling the model which deferred tools exist (names only): a full list, or deltas.

- full: `<available-deferred-tools>` with every deferred tool's name, on every request (the request
  builder puts it in the system prompt; nothing is stored).
- delta: only what changed since the model was last told, reconstructed from the history: the
  announcement blocks already in user messages are replayed (a full list resets, a delta adds and
  removes). Nothing changed → no announcement. The history after a compaction boundary holds no
  announcement, so the first one after it is a full list again. The loop must keep the delta block
  in the stored user message (`RequestPlan.announcement_block`), or the next request repeats it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from playground.engine.history import Message, blocks_of

AnnouncementStyle = Literal["full", "delta"]
ANNOUNCEMENT_STYLES: tuple[str, ...] = ("full", "delta")
FULL_OPEN, FULL_CLOSE = "<available-deferred-tools>", "</available-deferred-tools>"
DELTA_OPEN, DELTA_CLOSE = "<available-deferred-tools-changed>", "</available-deferred-tools-changed>"


@dataclass(frozen=True)
class Announcement:
    kind: Literal["full", "delta"]
    text: str
    names: tuple[str, ...] = ()  # full: every name
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def to_block(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "names": list(self.names), "added": list(self.added), "removed": list(self.removed)}


def full_announcement(names: Sequence[str]) -> Announcement:
    body = "\n".join(names)
    text = f"{FULL_OPEN}\n{body}\n{FULL_CLOSE}" if names else f"{FULL_OPEN}\n{FULL_CLOSE}"
    return Announcement("full", text, names=tuple(names))


def delta_announcement(added: Sequence[str], removed: Sequence[str]) -> Announcement:
    lines = [f"+{n}" for n in added] + [f"-{n}" for n in removed]
    text = f"{DELTA_OPEN}\n" + "\n".join(lines) + f"\n{DELTA_CLOSE}"
    return Announcement("delta", text, added=tuple(added), removed=tuple(removed))


def _body(text: str, opening: str, closing: str) -> list[str] | None:
    stripped = text.strip()
    if not (stripped.startswith(opening) and stripped.endswith(closing)):
        return None
    inner = stripped[len(opening): len(stripped) - len(closing)]
    return [line.strip() for line in inner.splitlines() if line.strip()]


def announced_names(messages: Sequence[Message]) -> list[str] | None:
    """What the history has told the model so far (replaying announcements), or None if nothing."""
    announced: dict[str, None] | None = None
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in blocks_of(message):
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                continue
            full = _body(block["text"], FULL_OPEN, FULL_CLOSE)
            if full is not None:
                announced = dict.fromkeys(full)
                continue
            delta = _body(block["text"], DELTA_OPEN, DELTA_CLOSE)
            if delta is not None:
                announced = {} if announced is None else announced
                for line in delta:
                    if line.startswith("+"):
                        announced.setdefault(line[1:], None)
                    elif line.startswith("-"):
                        announced.pop(line[1:], None)
    return None if announced is None else list(announced)


def announce(deferred_names: Iterable[str], messages: Sequence[Message], style: str) -> Announcement | None:
    """The announcement for this request, or None when a delta has nothing to say."""
    if style not in ANNOUNCEMENT_STYLES:
        raise ValueError(f"unknown announcement style {style!r} (expected full or delta)")
    names = list(dict.fromkeys(deferred_names))
    if style == "full":
        return full_announcement(names)
    before = announced_names(messages)
    if before is None:
        return full_announcement(names)
    before_set, now_set = set(before), set(names)
    added = [n for n in names if n not in before_set]
    removed = [n for n in before if n not in now_set]
    if not added and not removed:
        return None
    return delta_announcement(added, removed)
