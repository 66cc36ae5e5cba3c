"""Debian's Chromium for the browser tests: found at /usr/bin/chromium or installed with apt.

Never a downloaded browser (no `playwright install`): only the distribution's package, and only
when we may install packages (root, or sudo without a password). Otherwise the caller skips —
or, under CI=true, fails.

The suite's workers (pytest-xdist) each ask for it at start: on a fresh machine they would run
apt-get at the same moment, and all but one fail on dpkg's lock. An exclusive file lock lets one
install while the others wait, then find it installed; apt itself waits for a lock held by anything
else (`DPkg::Lock::Timeout`).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_PATH = Path("/usr/bin/chromium")
APT_TIMEOUT_SECONDS = 900
INSTALL_LOCK = Path(tempfile.gettempdir()) / "toolsearch-playground-chromium-install.lock"


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
    """Return the path of Debian's Chromium, installing the `chromium` package when it is missing
    (one process at a time: another one's install is waited for, not repeated)."""
    if CHROMIUM_PATH.exists():
        return CHROMIUM_PATH
    with open(INSTALL_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if CHROMIUM_PATH.exists():  # installed by the process we waited for
            return CHROMIUM_PATH
        return _install()


def _install() -> Path:
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
        return subprocess.run([*prefix, "apt-get", "-o", f"DPkg::Lock::Timeout={APT_TIMEOUT_SECONDS // 2}", *args],
                              env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_SECONDS)

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
