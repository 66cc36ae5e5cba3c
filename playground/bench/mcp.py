"""Median sync and call times for the demo MCP servers: ours and mcp-server-time over stdio, and
ours over streamable HTTP (started once by the script, so its sync pays no process start-up).

    .venv/bin/python -m playground.bench.mcp [--runs 5] [--no-http]

"sync" is what `services.sync_server` spends talking to the server: start the process, initialize,
list every tool, close (the database writes add a few milliseconds). "cold call" is a one-shot
connect + call + close; "warm call" goes through the executor's session pool (the session is
already open, as in a worker that has called the server before).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
django.setup()  # the session pool records outcomes on server rows

from playground.mcp_servers.connection import call_server_tool, list_server_tools  # noqa: E402
from playground.mcp_servers.session_pool import session_pool  # noqa: E402
from playground.mcp_servers.transports import ServerConfig  # noqa: E402

SERVERS = [
    (ServerConfig(name="demo", transport="stdio", command=sys.executable, args=("-m", "playground.mcp_servers.demo_server")),
     "add", {"a": 1, "b": 2}),
    (ServerConfig(name="time", transport="stdio", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")),
     "get_current_time", {"timezone": "Europe/Berlin"}),
]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-http", action="store_true", help="skip the demo server over streamable HTTP")
    options = parser.parse_args()
    runs = options.runs
    servers = list(SERVERS)
    http_server = None
    if not options.no_http:
        from tests.mcp_servers.conftest import HttpDemoServer

        http_server = HttpDemoServer()  # already running: the sync pays no process start-up
        servers.append((http_server.config("demo-http"), "add", {"a": 1, "b": 2}))
    pool = session_pool()
    print(f"{'server':9} {'sync ms':>10} {'cold call ms':>14} {'warm call ms':>14}   (median of {runs})")
    try:
        _measure(servers, runs, pool)
    finally:
        pool.close_all()
        if http_server is not None:
            http_server.stop()


def _measure(servers, runs: int, pool) -> None:
    for config, tool, arguments in servers:
        def sync_once(config=config):
            return list_server_tools(config)

        def call_cold(config=config, tool=tool, arguments=arguments):
            return call_server_tool(config, tool, arguments)

        def call_warm(config=config, tool=tool, arguments=arguments):
            return pool.call_tool(config.name, config, tool, arguments)

        sync = [timed(sync_once) for _ in range(runs)]
        cold = [timed(call_cold) for _ in range(runs)]
        call_warm()  # open the session
        warm = [timed(call_warm) for _ in range(max(runs, 20))]
        print(f"{config.name:9} {statistics.median(sync):10.0f} {statistics.median(cold):14.0f} {statistics.median(warm):14.1f}")


if __name__ == "__main__":
    main()
