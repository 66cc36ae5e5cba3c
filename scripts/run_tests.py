"""The test command behind `make test` and `.ci/run`.

Runs the whole suite (unit, integration, browser) in several processes with pytest-xdist: most of
the suite's time is spent waiting on real servers, workers and browsers, so two processes finish
sooner even on two cores. TEST_WORKERS sets how many (default: the number of cores, at most 4;
TEST_WORKERS=1 runs in this one process). Each worker has its own Celery queue, Channels prefix and
test database (tests/conftest.py, docs/testing.md). Arguments are passed on to pytest; an explicit
`-n`/`--numprocesses` or `-p no:xdist` among them wins.

Ruff lints the project first ([tool.ruff] in pyproject.toml); a lint error fails the run before any
test starts (LINT=0 skips it for a quick local subset).

pytest's exit code 5 ("no tests collected") is reported as a failure with a clear message rather
than passed through silently. The wall time of the run is printed at the end (screenshots of the
browser tests land in test-artifacts/).
"""
from __future__ import annotations

import compileall
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

MAX_DEFAULT_WORKERS = 4
ROOT = Path(__file__).resolve().parent.parent
# pytest rewrites test modules and conftests itself; the rest of tests/ (helpers, fake servers) is imported as is.
PYTEST_REWRITES = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")


def worker_count() -> int:
    configured = os.environ.get("TEST_WORKERS", "").strip()
    if configured:
        try:
            count = int(configured)
        except ValueError:
            raise SystemExit(f"run_tests: TEST_WORKERS must be a whole number, not {configured!r}") from None
        if count < 1:
            raise SystemExit(f"run_tests: TEST_WORKERS must be at least 1, not {count}")
        return count
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))


def parallel_args(args: list[str]) -> list[str]:
    """`-n N --dist loadfile` unless the caller chose already, N is 1, or xdist is not installed.

    loadfile: a file's tests run in one worker, so module fixtures (an MCP server) start once, not once
    per worker; tests/conftest.py's scheduler sends each folder sharing a session stack (tests/browser,
    tests/gateway) as one unit, so its stack starts once in the run. Units go out in collection order,
    which tests/conftest.py makes longest first (--no-loadscope-reorder: xdist would otherwise order
    them by their number of tests)."""
    chosen = any(a in ("-n", "--numprocesses", "--dist") or a.startswith(("-n", "--numprocesses=", "--dist="))
                 for a in args) or "no:xdist" in args
    if chosen:
        return []
    workers = worker_count()
    if workers == 1:
        return []
    if importlib.util.find_spec("xdist") is None:
        print("run_tests: pytest-xdist is not installed (run `make setup`); running in one process", file=sys.stderr)
        return []
    return ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder"]


def lint() -> int:
    """Ruff over the project's Python; its findings are printed as it prints them."""
    if os.environ.get("LINT", "1") == "0":
        return 0
    if importlib.util.find_spec("ruff") is None:
        print("run_tests: ruff is not installed (run `make setup`)", file=sys.stderr)
        return 1
    code = subprocess.call([sys.executable, "-m", "ruff", "check", "playground", "tests", "scripts", "manage.py"])
    if code:
        print("run_tests: ruff found problems (above) — fix them, or `ruff check --fix` the fixable ones", file=sys.stderr)
    return code


def precompile() -> None:
    """Write the project's .pyc once before the run, as an install does for the packages (Makefile).

    The suite starts many Python processes (pytest workers, live servers, Celery workers, MCP
    servers, `python -m playground.run`); with PYTHONDONTWRITEBYTECODE set none of them writes what
    it compiled, so each compiled the whole project again (~2 s of CPU a process). Python reads an
    existing .pyc whatever that variable says, and checks it against its source."""
    for folder, skip in (("playground", None), ("tests", PYTEST_REWRITES)):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0, rx=skip)


def main() -> int:
    if lint():
        return 1
    precompile()
    given = sys.argv[1:]
    args = [sys.executable, "-m", "pytest", *parallel_args(given), *given]
    started = time.monotonic()
    code = subprocess.call(args)
    print(f"run_tests: pytest finished in {time.monotonic() - started:.1f}s with exit code {code}", file=sys.stderr)
    if code == 5:
        print("run_tests: pytest collected no tests — treating that as a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
