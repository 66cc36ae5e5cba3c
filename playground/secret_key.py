"""The signing key of a development run when none is configured.

With `DEBUG` on and no `SECRET_KEY`, every process of the checkout (web, worker, `manage.py`) reads
one random key kept in the state folder (`SECRET_KEY_FILE`, default `var/secret_key`), made on the
first start. A key written in the repository would let anyone sign a session or a share link of a
playground started on a public address. Production (`DEBUG=false`) still requires `SECRET_KEY`.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

KEY_BYTES = 50


def development_secret_key(path: Path) -> str:
    """The key kept in `path`, made (random, owner-only) when the file does not exist yet. Processes
    starting together agree: the key is written to a file of its own and linked into place, so the
    first link wins and the others read it."""
    key = _read(path)
    if key:
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(secrets.token_urlsafe(KEY_BYTES) + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        pass  # another process made it first: theirs is the key
    finally:
        draft.unlink(missing_ok=True)
    key = _read(path)
    if not key:
        raise RuntimeError(f"{path} holds no signing key: delete it (a new one is made) or set SECRET_KEY")
    return key


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
