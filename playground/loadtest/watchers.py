"""`--watchers N`: one demo conversation watched by N read-only sockets at once, as an audience would.

The owner (the logged-in session) starts a conversation and makes a share link through the real
form; N sockets open the link's socket (`ws/shared/<token>/`, no login) — or, with `--via viewers`,
the conversation's own socket with the session's cookie — and say hello; then the owner sends the
message and every socket reads frames until the run's final status. Each frame's latency is its
event's saved time (the database's `created_at`) to its arrival on that socket.
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field

from playground.loadtest.client import LoadTestError, Session, Socket, open_socket
from playground.loadtest.stats import read_frame

SHARE_URL = re.compile(r"/conversations/shared/([^/\"<>\s]+)/")
# Sockets opening at once: a handshake storm of hundreds would only measure the accept queue.
OPENING_AT_ONCE = 50


@dataclass
class Watcher:
    receipts: list[tuple[int, float]] = field(default_factory=list)
    finished: bool = False
    error: str = ""


def share_link(session: Session, conversation_id: int, hours: int = 1) -> str:
    """Create a share link through the conversation page's form; its token, read from the page."""
    status, _, body = session.request(f"/conversations/{conversation_id}/share/", {
        "csrfmiddlewaretoken": session._cookie("csrftoken"), "hours": str(hours),
    })
    if status not in (302, 303):
        raise LoadTestError(f"POST /conversations/{conversation_id}/share/ answered {status}: {body[:200]!r}")
    status, _, page = session.request(f"/conversations/{conversation_id}/")
    match = SHARE_URL.search(page)
    if status != 200 or match is None:
        raise LoadTestError(f"the conversation page (HTTP {status}) shows no share link")
    return match.group(1)


class AnonymousSession(Session):
    """A browser without an account: no cookies to send."""

    def cookie_header(self) -> str:
        return ""


async def watch(socket: Socket, watcher: Watcher, deadline: float) -> None:
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                watcher.error = "timed out before the run's final status"
                return
            try:
                text = await asyncio.wait_for(socket.receive(), remaining)
            except asyncio.TimeoutError:
                watcher.error = "timed out before the run's final status"
                return
            arrived = time.time()
            if text is None:
                watcher.error = f"socket closed (code {socket.close_code})"
                return
            frame = read_frame(text)
            if frame is None:
                continue
            watcher.receipts.append((frame.sequence, arrived))
            if frame.final:
                watcher.finished = True
                return
    finally:
        await socket.close()


async def run_watchers(sessions: Session | list[Session], count: int, message: str, timeout: float, *,
                       via: str = "share") -> tuple[int, list[Watcher]]:
    """Start one conversation, open `count` read-only sockets on it, send the message, read to the end.
    With several sessions (one per web node), the sockets are spread over the nodes in turn: each node
    serves its share, every frame reaching it through the Redis channel layer. Returns the
    conversation's id and each socket's receipts."""
    sessions = sessions if isinstance(sessions, list) else [sessions]
    session = sessions[0]
    deadline = time.monotonic() + timeout
    conversation_id = await asyncio.to_thread(session.new_conversation)
    if via == "share":
        token = await asyncio.to_thread(share_link, session, conversation_id)
        nodes, path = [AnonymousSession(s.base_url) for s in sessions], f"/ws/shared/{token}/"
    else:
        nodes, path = sessions, f"/ws/conversations/{conversation_id}/"
    gate = asyncio.Semaphore(OPENING_AT_ONCE)

    async def opened(number: int) -> Socket:
        async with gate:
            socket = await open_socket(nodes[number % len(nodes)], path)
            await socket.send_text(json.dumps({"action": "hello", "last_sequence": 0}))
            return socket

    sockets = await asyncio.gather(*(opened(number) for number in range(count)))
    watchers = [Watcher() for _ in sockets]
    tasks = [asyncio.create_task(watch(socket, watcher, deadline)) for socket, watcher in zip(sockets, watchers)]
    await asyncio.to_thread(session.send_message, conversation_id, message)
    await asyncio.wait(tasks, timeout=timeout + 30)
    for task, watcher in zip(tasks, watchers):
        if not task.done():
            task.cancel()
            watcher.error = watcher.error or "cancelled at the deadline"
    return conversation_id, watchers
