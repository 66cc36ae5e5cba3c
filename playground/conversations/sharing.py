"""Read-only share links: one conversation, watched live by people without an account.

A link is `/conversations/shared/<token>/`; the token is the `ShareLink` row's id signed with
Django's signing (SECRET_KEY, a salt of its own), so it cannot be guessed or edited into another
link. The row decides whether it still works: until its `expires_at`, and not once revoked. The
page and its socket (`ws/shared/<token>/`) show exactly what a viewer sees — the same frames, with no
forms that act — and nothing else: no navigation, no user, no export.
"""
from __future__ import annotations

import logging
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

SALT = "playground.conversations.share-link"
# Its own salt: a timestamped token of SALT is also a valid plain signature of "value:timestamp" under SALT.
ID_SALT = f"{SALT}.id"
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
    """The link's signed id. No timestamp in it (the expiry is the row's): `signing.dumps` added the
    second it was made, so the owner's page showed another address for the same link every second."""
    return signing.Signer(salt=ID_SALT).sign_object(link.pk)


def _link_id(token: str) -> object:
    try:
        return signing.Signer(salt=ID_SALT).unsign_object(token)
    except signing.BadSignature:
        return signing.loads(token, salt=SALT)  # a link handed out before: signed with the second it was made


def active_links(conversation: Conversation) -> list[ShareLink]:
    return list(conversation.share_links.filter(revoked_at__isnull=True, expires_at__gt=timezone.now()))


def resolve(token: str) -> ShareLink:
    """The working link a token names, with its conversation; ShareLinkRefused otherwise."""
    try:
        link_id = _link_id(token)
    except signing.BadSignature:
        raise ShareLinkRefused("This link is not valid",
                               "The address was changed or cut short: ask whoever shared it for the link again.", status=404) from None
    link = ShareLink.objects.select_related("conversation", "conversation__profile", "conversation__owner").filter(
        pk=link_id if isinstance(link_id, int) else -1).first()
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
