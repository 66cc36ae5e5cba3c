"""Access tokens: created and revoked by staff, stored as SHA-256, checked on every request.

A token is `tsg_` + 32 random bytes (URL-safe base64): long enough that hashing it without a salt
is safe (nobody can guess their way to a preimage), and a plain hash lets a request find its token
with one indexed lookup.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets

from django.utils import timezone

from playground.gateway.models import GatewayToken

TOKEN_PREFIX = "tsg_"
SHOWN_PREFIX_CHARS = 10


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(profile, name: str, *, user=None) -> tuple[GatewayToken, str]:
    """A new token for `profile`: the row, and the token itself (shown once, never stored)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = GatewayToken.objects.create(
        profile=profile, name=name.strip() or "unnamed", token_hash=hash_token(token),
        prefix=token[:SHOWN_PREFIX_CHARS], created_by=user if user is not None and user.is_authenticated else None,
    )
    return row, token


def revoke_token(row: GatewayToken) -> None:
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def describe(row: GatewayToken) -> str:
    """How logs name a token: its row, name and shown prefix (the page shows the same), never the secret."""
    return f"token #{row.pk} ({row.name}, {row.prefix}…)"


def _shown_prefix(token: str) -> str:
    # A gateway token's first characters are what the tokens page shows; anything else (another
    # service's secret sent here by mistake) is not quoted at all.
    return token[:SHOWN_PREFIX_CHARS] + "…" if token.startswith(TOKEN_PREFIX) else "not a gateway token"


def _find(token: str) -> GatewayToken | None:
    digest = hash_token(token)
    row = GatewayToken.objects.filter(token_hash=digest).first()
    # compare_digest: the lookup already matched, but keep the comparison constant-time anyway.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row


def identify(authorization: str | None) -> str:
    """Which credential a refused request carried, for the log line (a refusal before the token
    check, e.g. a bad Origin, still says whose token it was)."""
    token = bearer_token(authorization)
    if token is None:
        return "no bearer token" if not authorization else "a malformed Authorization header"
    row = _find(token)
    return describe(row) if row is not None else f"an unknown token ({_shown_prefix(token)})"


def authenticate(profile_id: int, authorization: str | None) -> tuple[GatewayToken | None, str]:
    """(the token row, "") when the header carries a live token of this profile, else (None, why).
    The reason goes to the log; it names the token by row and shown prefix, never the secret."""
    token = bearer_token(authorization)
    if token is None:
        return None, "no bearer token" if not authorization else "malformed Authorization header"
    row = _find(token)
    if row is None:
        return None, f"unknown token ({_shown_prefix(token)})"
    if row.revoked_at is not None:
        return None, f"revoked {describe(row)}"
    if row.profile_id != profile_id:
        return None, f"{describe(row)} belongs to another profile"
    now = timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
        # At most one write a minute per token: the list page shows roughly when it was last used.
        GatewayToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row, ""
