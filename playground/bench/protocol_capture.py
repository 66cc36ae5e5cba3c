"""What the Protocol view's capture costs a tool call: warm calls (the session already open)
through two pooled sessions of the demo server, one captured and one not, alternated call by call,
and the capture's own cost on the event loop per message (`Transcript.note`).

    .venv/bin/python -m playground.bench.protocol_capture [--calls 200]

Uses the configured database (run `manage.py migrate` first): the captured session's messages are
written there, in batches, as in a web or worker process.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
django.setup()

from django.conf import settings  # noqa: E402

from playground.mcp_servers import protocol_log, server_log  # noqa: E402
from playground.mcp_servers.session_pool import SessionPool  # noqa: E402
from playground.mcp_servers.transports import ServerConfig  # noqa: E402

CONFIG = ServerConfig(name="demo", transport="stdio", command=sys.executable, args=("-m", "playground.mcp_servers.demo_server"))
# Keys no registered server uses: the rows they write are removed at the end.
CAPTURED, PLAIN = 990_001, 990_002


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    pool = SessionPool()
    keep = settings.MCP_PROTOCOL_KEEP_MESSAGES
    try:
        settings.MCP_PROTOCOL_KEEP_MESSAGES = 0  # the plain session is made without a transcript
        pool.call_tool(PLAIN, CONFIG, "add", {"a": 1, "b": 2})
        settings.MCP_PROTOCOL_KEEP_MESSAGES = max(keep, 1)
        pool.call_tool(CAPTURED, CONFIG, "add", {"a": 1, "b": 2})
        times: dict[int, list[float]] = {CAPTURED: [], PLAIN: []}
        for number in range(calls):
            for key in ((CAPTURED, PLAIN) if number % 2 == 0 else (PLAIN, CAPTURED)):
                started = time.perf_counter()
                pool.call_tool(key, CONFIG, "add", {"a": number, "b": 2})
                times[key].append((time.perf_counter() - started) * 1000)
        captured, plain = statistics.median(times[CAPTURED]), statistics.median(times[PLAIN])
        print(f"warm tools/call, median of {calls} each, alternated (load average {os.getloadavg()[0]:.1f}):")
        print(f"  captured {captured:.2f} ms   not captured {plain:.2f} ms   ratio {captured / plain:.3f}")
    finally:
        pool.close_all()
        settings.MCP_PROTOCOL_KEEP_MESSAGES = keep

    transcript = protocol_log.Transcript(lambda: None, [])
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "3"}]}}
    writer = protocol_log.TranscriptWriter()
    rounds = 20_000
    started = time.perf_counter()
    for _ in range(rounds):
        writer.pending.append((transcript.scope_of, [], transcript.grouper.capture("client", message)))
        writer.pending.append((transcript.scope_of, [], transcript.grouper.capture("server", answer)))
        writer.pending.clear()
    per_message = (time.perf_counter() - started) / (2 * rounds) * 1e6
    print(f"capture on the event loop: {per_message:.2f} µs per message (classify, group, queue)")
    protocol_log.forget(protocol_log.server_scope(CAPTURED))
    server_log.forget(CAPTURED)
    server_log.forget(PLAIN)


if __name__ == "__main__":
    main()
