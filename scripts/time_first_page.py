"""Measure the time from `make run` to the first page served, on a fresh clone of this repository.

    python scripts/time_first_page.py [--keep]

Clones the current commit into a temporary directory, then runs `make run` twice there: first
with no virtual environment (it is created and the project installed), then again with the
environment already in place. Each run is timed from the start of `make run` until GET /login/
answers 200, then stopped with SIGINT. Uses REDIS_URL from the environment (or the embedded one).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playground.runner.embedded_redis import free_port  # noqa: E402

LIMIT_SECONDS = 600


def first_page_seconds(clone: Path, label: str) -> float:
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)  # the default: SQLite in the clone
    log_path = clone / f"make-run-{label}.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(["make", "run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"make run exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            if time.monotonic() - started > LIMIT_SECONDS:
                raise RuntimeError(f"no page within {LIMIT_SECONDS}s:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
    finally:
        try:
            os.killpg(process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commit", default="HEAD", help="what to check out in the clone (default HEAD)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its make-run-*.log files)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="playground-fresh-"))
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", args.commit], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
    try:
        cold = first_page_seconds(clone, "no-venv")
        warm = first_page_seconds(clone, "venv-ready")
        print(f"make run → first page (fresh clone, no .venv):        {cold:6.1f} s")
        print(f"make run → first page (same clone, .venv already made): {warm:6.1f} s")
    finally:
        if args.keep:
            print(f"clone kept in {clone}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
