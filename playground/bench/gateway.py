"""What the gateway saves and what it costs, measured with a real MCP client.

    .venv/bin/python -m playground.bench.gateway [--profile "Tool search on (native)"] [--calls 30]

Runs against the configured database (load the demo data first: `make run` does, or
`manage.py migrate && manage.py load_demo_data`). It serves the project's ASGI application on a free
port — daphne in its own process as deployed (`--server daphne`, the default), or uvicorn in a
thread of this process (`--server in-process`: client and server then share one interpreter, which
adds their work together) — creates a temporary token (deleted at the end), and prints:

1. the first tools/list a client gets through the gateway against listing every enabled tool of the
   catalog directly, in tokens estimated as the engine's CharEstimateCounter does (characters of
   the tools' JSON ÷ 2.5);
2. the median time of a tool call through the gateway against the same call made directly: the
   built-in `echo` (in-process) and mcp-server-time's `get_current_time` (an SDK client on stdio).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
import django

# This process serves the ASGI application, so it gets the web process's database settings (a
# connection pool on PostgreSQL, see settings.py), as daphne would.
os.environ["PLAYGROUND_ASGI_PROCESS"] = "1"
try:
    django.setup()
finally:
    os.environ.pop("PLAYGROUND_ASGI_PROCESS", None)

from playground.asgi import application
from playground.gateway.endpoint import endpoint_path
from playground.gateway.models import GatewayToken
from playground.gateway.service import profile_view
from playground.gateway.tokens import issue_token
from playground.mcp_servers.builtin_tools import BUILTIN_TOOLS
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.services import sync_server
from playground.registry import adapter
from playground.registry.models import AgentProfile, Tool
from playground.runner.embedded_redis import free_port
from playground.runner.main import web_command

CHARS_PER_TOKEN = 2.5  # the engine's CharEstimateCounter
TIME_TOOL = "mcp__time__get_current_time"


def estimate(tools: list[dict[str, Any]]) -> int:
    return math.ceil(len(json.dumps(tools, ensure_ascii=False)) / CHARS_PER_TOKEN) if tools else 0


def mcp_tool_json(tools) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]


def p50(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def serve_daphne(port: int):
    """The ASGI server as deployed: daphne in its own process (`make run`'s web command), so the
    client here and the server do not share one interpreter. Returns a stop function."""
    process = subprocess.Popen(web_command("127.0.0.1", port), env=dict(os.environ), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit("daphne did not start (run it by hand to see why)") from None
            time.sleep(0.1)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    return stop


def serve(port: int):
    import uvicorn

    config = uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="gateway-bench-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the bench server did not start")
        time.sleep(0.05)
    return server, thread


def ensure_time_tools() -> bool:
    """Sync mcp-server-time when its tools are not in the registry yet (the demo data registers the
    server; `make run` syncs it in the background)."""
    if Tool.objects.filter(name=TIME_TOOL, enabled=True).exists():
        return True
    server = McpServer.objects.filter(name="time").first()
    if server is None:
        return False
    sync_server(server)
    return Tool.objects.filter(name=TIME_TOOL, enabled=True).exists()


async def through_gateway(url: str, token: str, calls: int, with_time: bool) -> dict[str, Any]:
    import mcp_types as types
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    out: dict[str, Any] = {}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, client_info=types.Implementation(name="gateway-bench", version="1")) as session:
                await session.initialize()
                listed = await session.list_tools()
                out["first_list"] = mcp_tool_json(listed.tools)
                timings = []
                for _ in range(calls):
                    started = time.perf_counter()
                    result = await session.call_tool("echo", {"text": "hello"})
                    timings.append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result
                out["echo"] = timings
                if with_time:
                    await session.call_tool("ToolSearch", {"query": f"select:{TIME_TOOL}"})
                    await session.call_tool(TIME_TOOL, {"timezone": "UTC"})  # warm the pooled stdio session
                    timings = []
                    for _ in range(calls):
                        started = time.perf_counter()
                        result = await session.call_tool(TIME_TOOL, {"timezone": "UTC"})
                        timings.append((time.perf_counter() - started) * 1000)
                        assert not result.is_error, result
                    out["time"] = timings
    return out


async def time_server_directly(calls: int) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("get_current_time", {"timezone": "UTC"})
            timings = []
            for _ in range(calls):
                started = time.perf_counter()
                await session.call_tool("get_current_time", {"timezone": "UTC"})
                timings.append((time.perf_counter() - started) * 1000)
    return timings


def echo_directly(calls: int) -> list[float]:

    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        BUILTIN_TOOLS["echo"].call({"text": "hello"})
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.bench.gateway", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="Tool search on (native)", help="agent profile name (default: %(default)s)")
    parser.add_argument("--calls", type=int, default=30, help="calls per measurement (default: %(default)s)")
    parser.add_argument("--no-time-server", action="store_true", help="skip the mcp-server-time comparison")
    parser.add_argument("--server", choices=("daphne", "in-process"), default="daphne",
                        help="daphne in its own process, as deployed (default), or uvicorn in a thread of this "
                             "process (the client and the server then share one interpreter)")
    args = parser.parse_args(argv)

    import anyio
    import logging

    for noisy in ("httpx2", "httpx", "mcp", "playground.gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    profile = AgentProfile.objects.filter(name=args.profile).first()
    if profile is None:
        raise SystemExit(f"no profile named {args.profile!r}: load the demo data first (manage.py load_demo_data)")
    with_time = not args.no_time_server and ensure_time_tools()
    every_tool = [t.to_api() for t in adapter.engine_catalog()]
    direct_list = [{"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]} for t in every_tool]

    row, token = issue_token(profile, "gateway bench (temporary)")
    port = free_port()
    if args.server == "daphne":
        stop = serve_daphne(port)
    else:
        server, thread = serve(port)

        def stop() -> None:
            server.should_exit = True
            thread.join(timeout=10)
    try:
        measured = anyio.run(through_gateway, f"http://127.0.0.1:{port}{endpoint_path(profile.pk)}", token, args.calls, with_time)
    finally:
        stop()
        GatewayToken.objects.filter(pk=row.pk).delete()

    first = measured["first_list"]
    gateway_tokens, direct_tokens = estimate(first), estimate(direct_list)
    print(f"Profile {profile.name!r}, catalog of {len(direct_list)} enabled tools; tokens = characters of the tools' JSON ÷ 2.5")
    print(f"  first tools/list through the gateway: {len(first):>4} tools, {gateway_tokens:>7,} tokens "
          f"(ToolSearch's description with the announcement: {estimate([t for t in first if t['name'] == 'ToolSearch']):,})")
    print(f"  every tool listed directly:           {len(direct_list):>4} tools, {direct_tokens:>7,} tokens")
    if direct_tokens:
        print(f"  saved: {direct_tokens - gateway_tokens:,} tokens ({100 * (direct_tokens - gateway_tokens) / direct_tokens:.1f} %)")
    print("  first tools/list of every profile (computed in-process, the same code path):")
    for other in AgentProfile.objects.order_by("name"):
        view = profile_view(other)
        tools = [{"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]} for t in view.tools_for([])]
        print(f"    {other.name:<28} {len(tools):>4} tools, {estimate(tools):>7,} tokens "
              f"({other.announcement_layout} layout, tool search {'on' if view.tool_search_on else 'off'})")
    print(f"Tool calls, median of {args.calls} (ms), the gateway served by {args.server}:")
    echo_direct = p50(echo_directly(args.calls))
    print(f"  echo (built-in):     direct {echo_direct:8.3f}   through the gateway {p50(measured['echo']):8.2f}   "
          f"overhead {p50(measured['echo']) - echo_direct:8.2f}")
    if with_time:
        direct = p50(anyio.run(time_server_directly, args.calls))
        print(f"  get_current_time:    direct {direct:8.2f}   through the gateway {p50(measured['time']):8.2f}   "
              f"overhead {p50(measured['time']) - direct:8.2f}")
    else:
        print("  get_current_time: skipped (mcp-server-time is not registered, or --no-time-server)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
