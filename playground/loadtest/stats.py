"""Pure helpers for the load test: no Django, no network, so they are unit-tested on their own."""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

FRAME_SEQUENCE = re.compile(r'data-frame-sequence="(\d+)"')
FRAME_STATUS = re.compile(r'data-status="([a-z_]+)"')
FINAL_STATUSES = frozenset({"idle", "failed", "cancelled"})

# The keys of one level in `--json`, in this order (the table prints the same columns).
LEVEL_KEYS = (
    "conversations", "completed", "events", "wall_s", "events_per_s", "ws_p50_ms", "ws_p99_ms",
    "run_p50_s", "message_run_p50_s", "message_run_p95_s", "lost", "duplicated", "cpu_ms_per_event",
)
# Added by the command after those, for its own stack (None with --url): the worker node's CPU per event,
# its resident memory at the level's peak (all its processes), the connections open to the run's
# PostgreSQL database before the level and at its peak, and the provider the conversations used.
STACK_KEYS = ("worker_cpu_ms_per_event", "worker_rss_mb", "db_connections_before", "db_connections_peak", "provider")


@dataclass(frozen=True)
class Frame:
    """What the load test reads from one socket frame (None: not an event frame, e.g. a notice)."""

    sequence: int
    status: str
    final: bool  # the run's closing `status` event with a final status: nothing more comes for this message


def read_frame(text: str) -> Frame | None:
    """An event frame carries its sequence on the status element (`data-frame-sequence`) and the
    conversation's status; the run's last event is a top-level `status` event."""
    sequence = FRAME_SEQUENCE.search(text)
    if sequence is None:
        return None
    status = FRAME_STATUS.search(text)
    status_text = status.group(1) if status else ""
    final = 'data-event-type="status"' in text and status_text in FINAL_STATUSES
    return Frame(int(sequence.group(1)), status_text, final)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def sequence_check(seen: list[int], expected_last: int | None = None) -> tuple[int, int]:
    """(lost, duplicated) for one conversation's received sequence numbers.

    Sequences start at 1 and have no gaps on the server. Lost: numbers in 1..last never received,
    where `last` is the database's count when we know it, else the highest number received (then a
    lost tail is only noticed through the missing final event). Duplicated: extra copies received.
    """
    counts = Counter(seen)
    duplicated = sum(count - 1 for count in counts.values() if count > 1)
    last = expected_last if expected_last is not None else max(counts, default=0)
    lost = sum(1 for sequence in range(1, last + 1) if sequence not in counts)
    return lost, duplicated


@dataclass
class ConversationResult:
    conversation_id: int | None = None
    sent_at: float | None = None  # wall clock (time.time) when the message left the client
    finished_at: float | None = None  # wall clock when the final frame arrived
    completed: bool = False
    receipts: list[tuple[int, float]] = field(default_factory=list)  # (sequence, wall-clock arrival)
    error: str = ""
    largest_frame: int = 0  # bytes (UTF-8) of the largest message the socket received

    @property
    def run_s(self) -> float | None:
        if self.completed and self.sent_at is not None and self.finished_at is not None:
            return self.finished_at - self.sent_at
        return None


def summarize_level(
    results: list[ConversationResult],
    *,
    wall_s: float,
    created: dict[tuple[int, int], float] | None = None,
    expected_last: dict[int, int] | None = None,
    cpu_s: float | None = None,
) -> dict:
    """One level's line. `created`: (conversation, sequence) → the event's saved time (wall clock),
    read from the database when the stack is ours; without it the latency is the send → frame of the
    person's message, one per conversation.
    `expected_last`: conversation → its event count in the database. `cpu_s`: CPU seconds the web and
    worker processes spent during the level (None when they are not ours to measure)."""
    latencies_ms: list[float] = []
    lost = duplicated = events = 0
    for result in results:
        sequences = [sequence for sequence, _ in result.receipts]
        expected = (expected_last or {}).get(result.conversation_id) if result.conversation_id is not None else None
        conversation_lost, conversation_duplicated = sequence_check(sequences, expected)
        lost += conversation_lost
        duplicated += conversation_duplicated
        events += len(set(sequences))
        first_seen: dict[int, float] = {}
        for sequence, arrived in result.receipts:
            first_seen.setdefault(sequence, arrived)
        if created is not None:
            for sequence, arrived in first_seen.items():
                saved = created.get((result.conversation_id, sequence))
                if saved is not None:
                    latencies_ms.append((arrived - saved) * 1000)
        elif result.sent_at is not None and first_seen:
            # No server timestamps (a stack that is not ours): the person's message is saved by the
            # web process as the socket message arrives, so send → its frame is one full delivery
            # (socket in, save, broadcast through Redis, consumer read, frame out). One per run.
            latencies_ms.append((first_seen[min(first_seen)] - result.sent_at) * 1000)
    run_times = [r.run_s for r in results if r.run_s is not None]
    p50, p99, run_p50 = percentile(latencies_ms, 50), percentile(latencies_ms, 99), percentile(run_times, 50)
    run_p95 = percentile(run_times, 95)
    return {
        "conversations": len(results),
        "completed": sum(1 for r in results if r.completed),
        "events": events,
        "wall_s": round(wall_s, 3),
        "events_per_s": round(events / wall_s, 2) if wall_s > 0 else None,
        "ws_p50_ms": None if p50 is None else round(p50, 1),
        "ws_p99_ms": None if p99 is None else round(p99, 1),
        "run_p50_s": None if run_p50 is None else round(run_p50, 3),
        # A message's run, sent → its final frame (run_p50_s, kept under its old name for older reports).
        "message_run_p50_s": None if run_p50 is None else round(run_p50, 3),
        "message_run_p95_s": None if run_p95 is None else round(run_p95, 3),
        "lost": lost,
        "duplicated": duplicated,
        "cpu_ms_per_event": round(cpu_s * 1000 / events, 2) if cpu_s is not None and events else None,
    }


def format_table(levels: list[dict]) -> str:
    """The levels as a Markdown table (readable in a terminal, pasteable into the docs)."""
    def cell(value) -> str:
        return "–" if value is None else str(value)

    lines = ["| " + " | ".join(LEVEL_KEYS) + " |", "|" + "|".join("---:" for _ in LEVEL_KEYS) + "|"]
    for level in levels:
        lines.append("| " + " | ".join(cell(level.get(key)) for key in LEVEL_KEYS) + " |")
    return "\n".join(lines)


# The keys of `--watchers N --json` (one conversation, N read-only sockets), in this order.
WATCHER_KEYS = ("sockets", "frames_expected", "frames_received", "lost", "ws_p50_ms", "ws_p99_ms", "web_cpu_ms_per_frame")


def summarize_watchers(receipts: list[list[tuple[int, float]]], *, conversation_id: int, events: int,
                       created: dict[tuple[int, int], float], web_cpu_s: float | None) -> dict:
    """One conversation watched by `len(receipts)` sockets. `receipts`: per socket, the (sequence,
    arrival wall time) of each event frame. Every socket owes every saved event (`events` of them):
    frames are counted per socket, a sequence a socket never got is lost, latency is saved → received."""
    latencies_ms: list[float] = []
    received = lost = 0
    for socket_receipts in receipts:
        first_seen: dict[int, float] = {}
        for sequence, arrived in socket_receipts:
            first_seen.setdefault(sequence, arrived)
        received += len(first_seen)
        lost += sequence_check(list(first_seen), events)[0]
        for sequence, arrived in first_seen.items():
            saved = created.get((conversation_id, sequence))
            if saved is not None:
                latencies_ms.append((arrived - saved) * 1000)
    p50, p99 = percentile(latencies_ms, 50), percentile(latencies_ms, 99)
    return {
        "sockets": len(receipts),
        "frames_expected": len(receipts) * events,
        "frames_received": received,
        "lost": lost,
        "ws_p50_ms": None if p50 is None else round(p50, 1),
        "ws_p99_ms": None if p99 is None else round(p99, 1),
        "web_cpu_ms_per_frame": round(web_cpu_s * 1000 / received, 3) if web_cpu_s is not None and received else None,
    }
