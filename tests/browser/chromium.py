"""Debian's Chromium for the browser tests: found at /usr/bin/chromium or installed with apt.

Never a downloaded browser (no `playwright install`): only the distribution's package, and only
when we may install packages (root, or sudo without a password). Otherwise the caller skips —
or, under CI=true, fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM_PATH = Path("/usr/bin/chromium")
APT_TIMEOUT_SECONDS = 900


class ChromiumUnavailable(RuntimeError):
    """Chromium is missing and could not be installed; the message says why."""


def _privilege_prefix() -> list[str] | None:
    if os.geteuid() == 0:
        return []
    sudo = shutil.which("sudo")
    if sudo and subprocess.run([sudo, "-n", "true"], capture_output=True).returncode == 0:
        return [sudo, "-n"]
    return None


def ensure_chromium() -> Path:
    """Return the path of Debian's Chromium, installing the `chromium` package when it is missing."""
    if CHROMIUM_PATH.exists():
        return CHROMIUM_PATH
    if shutil.which("apt-get") is None:
        raise ChromiumUnavailable(f"{CHROMIUM_PATH} is missing and this machine has no apt-get to install it")
    prefix = _privilege_prefix()
    if prefix is None:
        raise ChromiumUnavailable(
            f"{CHROMIUM_PATH} is missing and installing it needs root or passwordless sudo "
            "(run: sudo apt-get install -y chromium)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def apt_get(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, "apt-get", *args], env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_SECONDS)

    result = apt_get("install", "-y", "-q", "chromium")
    if result.returncode != 0:  # a fresh machine may have empty package lists: update once, retry
        apt_get("update", "-q")
        result = apt_get("install", "-y", "-q", "chromium")
    if result.returncode != 0:
        raise ChromiumUnavailable(f"apt-get install chromium failed: {result.stderr.strip()[-500:]}")
    if not CHROMIUM_PATH.exists():
        raise ChromiumUnavailable(f"apt-get installed chromium but {CHROMIUM_PATH} is still missing")
    return CHROMIUM_PATH


if __name__ == "__main__":
    print(ensure_chromium())
