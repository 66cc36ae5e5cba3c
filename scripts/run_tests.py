"""The test command behind `make test` and `.ci/run`.

Runs the whole suite (unit, integration, browser). pytest's exit code 5 ("no tests collected")
is reported as a failure with a clear message rather than passed through silently. The wall time
of the run is printed at the end (screenshots of the browser tests land in test-artifacts/).
"""
from __future__ import annotations

import subprocess
import sys
import time


def main() -> int:
    args = [sys.executable, "-m", "pytest", *sys.argv[1:]]
    started = time.monotonic()
    code = subprocess.call(args)
    print(f"run_tests: pytest finished in {time.monotonic() - started:.1f}s with exit code {code}", file=sys.stderr)
    if code == 5:
        print("run_tests: pytest collected no tests — treating that as a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
