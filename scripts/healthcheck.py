"""Container health check for the web service: GET /healthz on the local ASGI server → exit 0 or 1.

See playground/runner/health.py for the Host / X-Forwarded-Proto details.
"""
from __future__ import annotations

import os
import sys

from playground.runner.health import healthz_status


def main() -> int:
    status = healthz_status(f"http://127.0.0.1:{os.environ.get('PORT') or 8000}")
    if status != 200:
        print(f"healthcheck failed: /healthz answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
