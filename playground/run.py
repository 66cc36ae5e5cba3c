"""`python -m playground.run` — the command behind `make run`. See playground/runner/."""
from __future__ import annotations

import sys

from playground.runner.main import main

if __name__ == "__main__":
    sys.exit(main())
