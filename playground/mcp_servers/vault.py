"""Sealing secrets the playground keeps for a server's OAuth grant (tokens, client secrets):
Fernet (AES-128-CBC + HMAC-SHA256, the `cryptography` package) with a key from
`MCP_SECRETS_KEY`, or derived from `SECRET_KEY` when that is unset.

Only these are sealed: the tokens an authorization server issued and a client secret (one it
registered us with, or one an admin entered). A database dump or backup without the key holds no
usable credential. Changing the key (or `SECRET_KEY`, when no key is set) makes the sealed values
unreadable: such a grant reads as not connected, and a person presses Connect again.
"""
from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    configured = (getattr(settings, "MCP_SECRETS_KEY", "") or "").strip()
    if configured:
        try:
            return Fernet(configured.encode())
        except ValueError:
            material = configured.encode()  # not a Fernet key: any passphrase, stretched below
    else:
        material = f"mcp-oauth-vault:{settings.SECRET_KEY}".encode()
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(material).digest()))


def seal(text: str) -> str:
    """`text` encrypted (empty stays empty: nothing to keep)."""
    if not text:
        return ""
    return _fernet().encrypt(text.encode()).decode()


def unseal(sealed: str) -> str:
    """The text `seal` was given, or "" when there is none or the key changed since."""
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except (InvalidToken, ValueError):
        return ""


def digest(text: str) -> str:
    """A one-way fingerprint (what is stored of an OAuth `state`: it is compared, never read back)."""
    return hashlib.sha256(text.encode()).hexdigest()
