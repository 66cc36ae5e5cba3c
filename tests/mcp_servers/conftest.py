"""Fixtures for the MCP server tests: demo server configs, a streamable HTTP demo server in a
subprocess on a free port, child-process checks, and page URLs that render on any branch."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from playground.mcp_servers.transports import ServerConfig

DEMO_ARGS = ["-m", "playground.mcp_servers.demo_server"]


def child_pids() -> set[int]:
    """Live (non-zombie) descendants of this process, read from /proc."""
    me = os.getpid()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            parents[int(entry.name)] = int(ppid)
    found: set[int] = set()
    frontier = {me}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def wait_for_no_new_children(before: set[int], timeout: float = 10.0) -> set[int]:
    """Children that appeared since `before` and are still alive after `timeout` (empty = clean)."""
    deadline = time.monotonic() + timeout
    while True:
        stray = child_pids() - before
        if not stray or time.monotonic() > deadline:
            return stray
        time.sleep(0.1)


@pytest.fixture
def no_stray_processes():
    """Fails the test if it leaves child processes behind (servers it started must be reaped)."""
    from playground.mcp_servers.builtin_sandbox import close_helpers
    from playground.mcp_servers.session_pool import session_pool, workbench_pool

    before = child_pids()
    yield before
    workbench_pool().close_all()
    session_pool().close_all()  # pooled sessions stay open by design; closing them must reap every child
    close_helpers()  # so do the built-ins' helper processes
    stray = wait_for_no_new_children(before)
    assert not stray, f"stray child processes left behind: {[(pid, command_line(pid)) for pid in sorted(stray)]}"


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "(gone)"


def demo_config(name: str = "demo", **env: str) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command=sys.executable, args=tuple(DEMO_ARGS), env=env)


def time_config() -> ServerConfig:
    return ServerConfig(
        name="time", transport="stdio", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpDemoServer:
    def __init__(self, env: dict[str, str] | None = None, *, sse: bool = False) -> None:
        """The demo server over streamable HTTP, or over the deprecated HTTP+SSE transport (`sse`)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{'sse' if sse else 'mcp'}"
        self.process = subprocess.Popen(
            [sys.executable, *DEMO_ARGS, "--sse" if sse else "--http", "--port", str(self.port)],
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the HTTP demo server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the HTTP demo server did not start listening within 30 s")

    def config(self, name: str = "demo-http") -> ServerConfig:
        return ServerConfig(name=name, transport="http", url=self.url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@pytest.fixture(scope="module")
def http_demo_server():
    server = HttpDemoServer()
    yield server
    server.stop()


@pytest.fixture
def stdio_demo_row(db):
    from playground.mcp_servers.models import McpServer

    return McpServer.objects.create(name="demo", transport="stdio", command=sys.executable, args=DEMO_ARGS)


@pytest.fixture(autouse=True)
def _close_pooled_sessions():
    """Tests share one process: close pooled sessions so each test starts (and ends) clean."""
    yield
    from playground.mcp_servers.builtin_sandbox import close_helpers
    from playground.mcp_servers.session_pool import session_pool, workbench_pool

    workbench_pool().close_all()
    session_pool().close_all()
    close_helpers()
