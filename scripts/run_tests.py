"""The test command behind `make test` and `.ci/run`.

Runs the whole suite (unit, integration, browser). pytest's exit code 5 ("no tests collected")
is reported as a failure with a clear message rather than passed through silently.
"""
from __future__ import annotations

import subprocess
import sys


def main() -> int:
    args = [sys.executable, "-m", "pytest", *sys.argv[1:]]
    code = subprocess.call(args)
    if code == 5:
        print("run_tests: pytest collected no tests — treating that as a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
