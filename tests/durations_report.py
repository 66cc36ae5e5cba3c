"""Where the suite's time went: the slowest files and tests, printed at the end of every run and kept
in test-artifacts/durations.txt (what is printed) and test-artifacts/durations.json (every file and
test), so a run that got slower says why; test-artifacts/file-seconds.json has the seconds per file
in the shape of tests/file_seconds.json (copy it there after a full run to refresh a fresh clone's order).

Registered by tests/conftest.py in the process that sees every test's report: the controller of a
pytest-xdist run (its workers report to it), or the only process of a one-process run. A test's
seconds are its setup + call + teardown, so a fixture that starts a stack is charged to the test
that started it (the `setup` column shows how much of it that was). Under xdist the seconds of the
workers add up to more than the run's wall time: the `workers` line says how busy each one was.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
SHOWN = 15


@dataclass
class TestSeconds:
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0
    outcome: str = "passed"
    worker: str = ""

    @property
    def total(self) -> float:
        return self.setup + self.call + self.teardown


def seconds_since_this_process_started() -> float | None:
    """From /proc (Linux): the wall time includes pytest's own start-up, imports and Django set-up."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class DurationsReport:
    """A pytest plugin (registered once per run, so hashed by identity)."""

    def __init__(self) -> None:
        already = seconds_since_this_process_started()
        self.started = time.monotonic() - (already or 0.0)
        self.tests: dict[str, TestSeconds] = {}

    def pytest_runtest_logreport(self, report) -> None:
        seconds = self.tests.setdefault(report.nodeid, TestSeconds())
        setattr(seconds, report.when, getattr(seconds, report.when) + report.duration)
        if report.failed or (report.skipped and report.when != "teardown"):
            seconds.outcome = report.outcome if report.failed else "skipped"
        node = getattr(report, "node", None)  # under xdist: the worker that ran it
        if node is not None:
            seconds.worker = getattr(getattr(node, "gateway", None), "id", "") or seconds.worker

    def file_seconds(self) -> dict[str, float]:
        by_file: dict[str, float] = {}
        for nodeid, seconds in self.tests.items():
            path = nodeid.split("::", 1)[0]
            by_file[path] = by_file.get(path, 0.0) + seconds.total
        return by_file

    def lines(self, wall_seconds: float) -> list[str]:
        by_file = self.file_seconds()
        tests_per_file: dict[str, int] = {}
        for nodeid in self.tests:
            path = nodeid.split("::", 1)[0]
            tests_per_file[path] = tests_per_file.get(path, 0) + 1
        per_worker: dict[str, float] = {}
        for seconds in self.tests.values():
            if seconds.worker:
                per_worker[seconds.worker] = per_worker.get(seconds.worker, 0.0) + seconds.total
        total = sum(by_file.values())
        lines = [f"{len(self.tests)} tests in {len(by_file)} files: {total:.1f} s of test time in {wall_seconds:.1f} s of wall time"]
        if per_worker:
            lines.append("workers: " + ", ".join(f"{worker} {busy:.1f} s" for worker, busy in sorted(per_worker.items())))
        lines.append(f"slowest {min(SHOWN, len(by_file))} files (seconds, share of test time, tests):")
        for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:SHOWN]:
            share = 100 * seconds / total if total else 0.0
            lines.append(f"  {seconds:7.1f} {share:5.1f}%  {tests_per_file[path]:4d}  {path}")
        lines.append(f"slowest {min(SHOWN, len(self.tests))} tests (total = setup + call + teardown):")
        for nodeid, seconds in sorted(self.tests.items(), key=lambda kv: -kv[1].total)[:SHOWN]:
            lines.append(f"  {seconds.total:7.1f}  (setup {seconds.setup:5.1f})  {nodeid}")
        return lines

    def write(self, lines: list[str], wall_seconds: float) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "durations.txt").write_text("\n".join(lines) + "\n")
        by_file = self.file_seconds()
        data = {
            "wall_seconds": round(wall_seconds, 1),
            "files": [{"path": path, "seconds": round(seconds, 2)} for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])],
            "tests": [
                {"nodeid": nodeid, "seconds": round(s.total, 3), "setup": round(s.setup, 3), "call": round(s.call, 3),
                 "teardown": round(s.teardown, 3), "outcome": s.outcome, "worker": s.worker}
                for nodeid, s in sorted(self.tests.items(), key=lambda kv: -kv[1].total)
            ],
        }
        path = ARTIFACTS / "durations.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        # The seconds per file in the shape of tests/file_seconds.json (the order of a fresh clone's run).
        per_file = {name: round(seconds, 1) for name, seconds in sorted(by_file.items())}
        (ARTIFACTS / "file-seconds.json").write_text(json.dumps(per_file, indent=0) + "\n")
        return path

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.tests:
            return
        wall_seconds = time.monotonic() - self.started
        lines = self.lines(wall_seconds)
        path = self.write(lines, wall_seconds)
        terminalreporter.section("where the time went")
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"(kept in {path.relative_to(ARTIFACTS.parent)} and durations.txt)")
