"""Built-in tools run in a helper process, so no argument can stall the process that asked.

The gateway calls tools inside the web server (daphne) and the agent loop inside a Celery worker;
a built-in that ran away there (Python's integer arithmetic holds the GIL, a thread cannot be
stopped) would freeze every request of that process. So each process keeps a few helper processes
(`python -m playground.mcp_servers.builtin_sandbox`, which imports nothing but the built-ins), talks
to them one JSON line per call over their stdin/stdout, and:

- gives each call `BUILTIN_TIMEOUT_SECONDS` of wall-clock time, then kills the helper and answers
  "stopped after N s" (a fresh helper serves the next call);
- starts helpers with an address-space limit (`BUILTIN_MEMORY_BYTES`, `RLIMIT_AS`) and a CPU-time
  limit, so a call that would need more memory fails inside the helper with a clear error;
- keeps at most `MAX_HELPERS` helpers; more concurrent calls wait for one (within their timeout).

The built-ins bound their own work as well (builtin_tools.py): these limits are the backstop.
"""
from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from playground.mcp_servers.builtin_tools import BUILTIN_TOOLS, BuiltinToolError
from playground.per_process import PerProcess

logger = logging.getLogger(__name__)

BUILTIN_TIMEOUT_SECONDS = 2.0
BUILTIN_MEMORY_BYTES = 512 * 1024 * 1024
BUILTIN_CPU_SECONDS = 600  # over a helper's life: a helper is replaced long before a busy one reaches it
MAX_HELPERS = 4
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class SandboxError(RuntimeError):
    """The helper could not answer (timed out, died, or could not start): the message says which."""


def _project_root() -> str:
    return str(Path(__file__).resolve().parents[2])


HELPER_COMMAND = [sys.executable, "-m", "playground.mcp_servers.builtin_sandbox"]
HELPER_START_SECONDS = 30.0  # a cold start on a busy machine; not counted in a call's time
READY = b"ready"


class _Helper:
    def __init__(self, command: list[str]) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_project_root(), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, close_fds=True)
        self._buffer = b""
        try:
            ready = self._read_line(time.monotonic() + HELPER_START_SECONDS)
        except (TimeoutError, SandboxError):
            ready = b""
        if ready != READY:
            self.kill()
            raise OSError("the helper process did not start")

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, name: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        request = json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=True).encode() + b"\n"
        deadline = time.monotonic() + timeout
        try:
            self.process.stdin.write(request)
            self.process.stdin.flush()
        except OSError:
            raise SandboxError(f"{name} could not be run: its helper process is gone") from None
        try:
            return json.loads(self._read_line(deadline))
        except SandboxError as exc:
            raise SandboxError(f"{name} {exc}") from None

    def _read_line(self, deadline: float) -> bytes:
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SandboxError(f"stopped: it needed more than {BUILTIN_MEMORY_BYTES // (1024 * 1024)} MB or crashed")
            self._buffer += chunk
            if len(self._buffer) > MAX_ANSWER_BYTES:
                raise SandboxError(f"answered more than {MAX_ANSWER_BYTES // (1024 * 1024)} MB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass  # already gone, or stuck in the kernel: nothing more to do from here
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass  # its pipe broke with it


class BuiltinSandbox:
    """This process's helpers (see the module docstring)."""

    def __init__(self, *, max_helpers: int = MAX_HELPERS, command: list[str] | None = None) -> None:
        self.max_helpers = max_helpers
        self.command = command or HELPER_COMMAND
        self._idle: list[_Helper] = []
        self._started = 0
        self._available = threading.Condition()

    def _take(self, deadline: float) -> _Helper:
        with self._available:
            while True:
                while self._idle:
                    helper = self._idle.pop()
                    if helper.alive():
                        return helper
                    self._started -= 1
                if self._started < self.max_helpers:
                    self._started += 1
                    break
                if not self._available.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    raise TimeoutError
        try:
            return _Helper(self.command)
        except OSError as exc:
            self._drop()
            raise SandboxError(f"could not start a helper process for built-in tools: {exc}") from None

    def _give_back(self, helper: _Helper) -> None:
        with self._available:
            self._idle.append(helper)
            self._available.notify()

    def _drop(self) -> None:
        with self._available:
            self._started -= 1
            self._available.notify()

    def call(self, name: str, arguments: dict[str, Any], *, timeout: float = BUILTIN_TIMEOUT_SECONDS) -> dict[str, Any]:
        """The helper's answer: {"text", "structured"} or {"error"} (the tool's own refusal).
        Raises SandboxError when no helper answered in time or one died."""
        try:
            helper = self._take(time.monotonic() + timeout)  # waiting for a busy helper; starting one is not counted
        except TimeoutError:
            raise SandboxError(f"{name} could not start within {timeout:g} s: every helper process is busy") from None
        try:
            answer = helper.call(name, arguments, timeout)
        except TimeoutError:
            helper.kill()
            self._drop()
            logger.warning("built-in %s stopped after %g s", name, timeout)
            raise SandboxError(f"{name} was stopped after {timeout:g} s: the request needs more work than a built-in "
                               "may do") from None
        except SandboxError:
            helper.kill()
            self._drop()
            raise
        except (ValueError, OSError):
            helper.kill()
            self._drop()
            raise SandboxError(f"{name} could not be run: its helper process gave no readable answer") from None
        self._give_back(helper)
        return answer

    def close(self) -> None:
        with self._available:
            helpers, self._idle = self._idle, []
            self._started -= len(helpers)  # their slots are free again: the next call starts a new helper
            self._available.notify_all()
        for helper in helpers:
            helper.kill()


_sandbox = PerProcess(BuiltinSandbox, close=BuiltinSandbox.close)


def builtin_sandbox() -> BuiltinSandbox:
    return _sandbox.get()


def close_helpers() -> None:
    """End this process's idle helpers (they are otherwise kept for the next call, and ended at exit)."""
    sandbox = _sandbox.made()
    if sandbox is not None:
        sandbox.close()


# -- the helper process --------------------------------------------------------------------------
def _limit_resources() -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: the wall-clock timeout still holds
        return
    for limit, value in ((resource.RLIMIT_AS, BUILTIN_MEMORY_BYTES), (resource.RLIMIT_CPU, BUILTIN_CPU_SECONDS)):
        try:
            soft, hard = resource.getrlimit(limit)
            ceiling = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (ceiling, hard))
        except (ValueError, OSError):
            pass  # a stricter limit is already set: it holds


def serve(stdin=None, stdout=None) -> None:
    """Answer one JSON line per call until stdin closes."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    stdout.write(READY + b"\n")
    stdout.flush()
    for line in stdin:
        name = "the tool"
        try:
            request = json.loads(line)
            name = str(request["tool"])
            tool = BUILTIN_TOOLS[name]
            text, structured = tool.call(request["arguments"])
            answer = {"text": text, "structured": structured}
        except BuiltinToolError as exc:
            answer = {"error": str(exc)}
        except MemoryError:
            answer = {"error": f"{name} needed more than "
                               f"{BUILTIN_MEMORY_BYTES // (1024 * 1024)} MB of memory and was stopped"}
        except (KeyError, TypeError, ValueError) as exc:
            answer = {"error": f"bad request to the built-in helper: {exc.__class__.__name__}"}
        stdout.write(json.dumps(answer, ensure_ascii=True).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    _limit_resources()
    serve()
