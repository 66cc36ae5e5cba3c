"""Start child processes, prefix their output, notice a crash, and stop them all.

Each child runs in its own process group (`start_new_session`), so one signal reaches a Celery
worker's pool processes too, and Ctrl-C in the terminal reaches only the supervisor, which then
stops the children in order. Policy on a crash: report it loudly, stop the others, exit non-zero —
a half-running playground (web up, worker gone) would look alive while conversations never run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen
    reader: threading.Thread | None = field(default=None)

    @property
    def returncode(self) -> int | None:
        return self.process.poll()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM if the supervisor dies without cleaning up (e.g. SIGKILL)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


class Supervisor:
    def __init__(self, *, out: IO[str] | None = None, stop_timeout: float = 10.0) -> None:
        self.children: list[Child] = []
        self.out = out or sys.stdout
        self.stop_timeout = stop_timeout
        self._print_lock = threading.Lock()
        self.stop_requested = threading.Event()

    def say(self, message: str) -> None:
        with self._print_lock:
            self.out.write(message + "\n")
            self.out.flush()

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> Child:
        process = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        child = Child(name=name, argv=argv, process=process)
        child.reader = threading.Thread(target=self._pump, args=(child,), name=f"output-{name}", daemon=True)
        child.reader.start()
        self.children.append(child)
        self.say(f"[run] started {name} (pid {process.pid}): {' '.join(argv)}")
        return child

    def _pump(self, child: Child) -> None:
        assert child.process.stdout is not None
        for raw in iter(child.process.stdout.readline, b""):
            self.say(f"[{child.name}] {raw.decode('utf-8', 'replace').rstrip()}")

    def crashed(self) -> Child | None:
        """The first child that has exited (any exit while we did not ask is a crash)."""
        for child in self.children:
            if child.returncode is not None:
                return child
        return None

    def install_signal_handlers(self) -> None:
        def request_stop(signum, frame):
            self.say(f"[run] {signal.Signals(signum).name} received: stopping every child")
            self.stop_requested.set()

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

    def wait(self, poll_interval: float = 0.5) -> int:
        """Block until a stop is requested (→ 0) or a child crashes (→ 1)."""
        while not self.stop_requested.wait(poll_interval):
            child = self.crashed()
            if child is not None:
                if child.reader is not None:
                    child.reader.join(timeout=2)
                self.say("")
                self.say(f"[run] !!! {child.name} exited unexpectedly with code {child.returncode}. "
                         "Stopping the others; see its output above.")
                return 1
        return 0

    def stop_all(self) -> None:
        """SIGTERM every child's process group (newest first), wait, then SIGKILL the stragglers."""
        for child in reversed(self.children):
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for child in reversed(self.children):
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.process.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                self.say(f"[run] {child.name} did not stop within {self.stop_timeout:.0f}s: killing it")
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait(timeout=5)
            # Pool processes of a worker may outlive their parent for a moment: kill what is left.
            _signal_group(child.process, signal.SIGKILL)
        for child in self.children:
            if child.reader is not None:
                child.reader.join(timeout=2)
        self.say("[run] all children stopped")


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
