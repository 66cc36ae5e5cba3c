"""Read-only share links: one conversation, watched live by people without an account.

A link is `/conversations/shared/<token>/`; the token is the `ShareLink` row's id and its random
nonce, signed with Django's signing (SECRET_KEY, a salt of its own): it cannot be guessed or edited
into another link, and even someone holding the signing key cannot make one for a row whose nonce
they have not seen (ids are sequential; nonces are 128 random bits). The row decides whether it still works: until its `expires_at`, and not once revoked. The
page and its socket (`ws/shared/<token>/`) show exactly what a viewer sees — the same frames, with no
forms that act — and nothing else: no navigation, no user, no export.
"""
from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.utils import timezone

from django.db import transaction

from playground.conversations.broadcast import conversation_group
from playground.conversations.models import Conversation, ShareLink
from playground.realtime import send_to_group

logger = logging.getLogger(__name__)
# The channel-layer message that closes the open pages of a revoked link (consumers.py).
REVOKED_MESSAGE_TYPE = "share.revoked"

# The one token format: [row id, nonce] signed under this salt. Earlier formats (the id alone,
# timestamped or not, under other salts) name no link any more.
TOKEN_SALT = "playground.conversations.share-link.id-and-nonce"
# The expiries offered on the conversation page (hours), within SHARE_LINK_MAX_HOURS.
EXPIRY_CHOICES_HOURS = (1, 8, 24, 24 * 7)


class ShareLinkRefused(Exception):
    """The token names no working link: `title` and `message` for the page, `status` its HTTP code."""

    def __init__(self, title: str, message: str, *, status: int) -> None:
        super().__init__(message)
        self.title, self.message, self.status = title, message, status


@dataclass(frozen=True)
class ShareOption:
    hours: int
    label: str


def expiry_options() -> list[ShareOption]:
    hours = [h for h in EXPIRY_CHOICES_HOURS if h <= settings.SHARE_LINK_MAX_HOURS] or [settings.SHARE_LINK_MAX_HOURS]
    return [ShareOption(h, _hours_label(h)) for h in hours]


def _hours_label(hours: int) -> str:
    if hours % 24 == 0:
        days = hours // 24
        return f"{days} day" if days == 1 else f"{days} days"
    return f"{hours} hour" if hours == 1 else f"{hours} hours"


def create_link(conversation: Conversation, *, user, hours: int) -> ShareLink:
    if not 0 < hours <= settings.SHARE_LINK_MAX_HOURS:
        raise ValueError(f"A share link lasts from 1 hour to {settings.SHARE_LINK_MAX_HOURS} hours (SHARE_LINK_MAX_HOURS).")
    return ShareLink.objects.create(conversation=conversation, created_by=user, expires_at=timezone.now() + timedelta(hours=hours))


def revoke_link(link: ShareLink, *, user) -> None:
    """Cut the link off now (kept, marked revoked); open pages of it are closed (consumers.py)."""
    if link.revoked_at is None:
        link.revoked_at, link.revoked_by = timezone.now(), user
        link.save(update_fields=["revoked_at", "revoked_by"])
        transaction.on_commit(lambda: _close_open_pages(link))


def _close_open_pages(link: ShareLink) -> None:
    try:
        send_to_group(conversation_group(link.conversation_id), {"type": REVOKED_MESSAGE_TYPE, "link": link.pk})
    except Exception:
        logger.exception("telling the pages of share link %s that it was revoked failed", link.pk)


def token_for(link: ShareLink) -> str:
    """The link's signed id and nonce. No timestamp in it (the expiry is the row's): the same link
    has one address, whenever it is asked for."""
    return signing.Signer(salt=TOKEN_SALT).sign_object([link.pk, link.nonce])


def _link_id_and_nonce(token: str) -> tuple[int, str] | None:
    """What a well-formed token names, or None: a list of exactly an integer id (not a bool, a
    float or a string) and a text nonce. BadSignature when the signature does not hold."""
    value = signing.Signer(salt=TOKEN_SALT).unsign_object(token)
    if isinstance(value, list) and len(value) == 2 and type(value[0]) is int and isinstance(value[1], str):
        return value[0], value[1]
    return None


def active_links(conversation: Conversation) -> list[ShareLink]:
    return list(conversation.share_links.filter(revoked_at__isnull=True, expires_at__gt=timezone.now()))


def resolve(token: str) -> ShareLink:
    """The working link a token names, with its conversation; ShareLinkRefused otherwise."""
    not_valid = ShareLinkRefused("This link is not valid",
                                 "The address was changed or cut short: ask whoever shared it for the link again.", status=404)
    try:
        named = _link_id_and_nonce(token)
    except (signing.BadSignature, ValueError):
        raise not_valid from None
    if named is None:
        raise not_valid
    link_id, nonce = named
    link = ShareLink.objects.select_related("conversation", "conversation__profile").filter(pk=link_id).first()
    if link is not None and not secrets.compare_digest(link.nonce.encode(), nonce.encode()):
        raise not_valid
    if link is None:
        raise ShareLinkRefused("This link no longer exists", "The conversation or the link was deleted.", status=404)
    if link.revoked_at is not None:
        raise ShareLinkRefused("This link was revoked",
                               f"Its owner stopped sharing this conversation on {_when(link.revoked_at)}.", status=410)
    if link.expires_at <= timezone.now():
        raise ShareLinkRefused("This link has expired", f"It worked until {_when(link.expires_at)}.", status=410)
    return link


def seconds_left(link: ShareLink) -> float:
    return max((link.expires_at - timezone.now()).total_seconds(), 0.0)


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")
