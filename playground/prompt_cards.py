"""A permission prompt as every page shows it: one type, one template (`prompts/_card.html`).

A conversation's prompt (conversations/prompts.py) and a gateway call waiting under an `ask` rule
(gateway/prompts.py) both become a `PromptCard`: the tool, why it asks, the arguments as JSON with
secrets masked (`mcp_servers.secrets.mask_arguments`), the time left, and the same buttons. The
conversation page, the gateway session page and the prompt inbox render the card alike; a card's
buttons send `fields` over the page's socket (ws-send) or, without scripts, post them to `answer_url`.

Whatever opens or settles a prompt tells the inbox group (`tell_prompt_inbox`), and every inbox
socket (the inbox page and the navigation bar's count) reads its user's prompts again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

CONVERSATION = "conversation"
GATEWAY = "gateway"
PROMPT_INBOX_GROUP = "prompt-inbox"
INBOX_MESSAGE_TYPE = "inbox.changed"


@dataclass(frozen=True)
class PromptButton:
    choice: str
    label: str
    style: str = ""  # primary | danger | "" (the buttons' classes)


APPROVE_ONCE = PromptButton("once", "Approve once", "primary")
ALWAYS = PromptButton("always", "Always allow in this conversation")
DENY = PromptButton("deny", "Deny", "danger")


@dataclass
class PromptCard:
    source: str  # CONVERSATION | GATEWAY
    key: str  # unique among every card: element ids and the inbox's order
    tool: str
    reason: str
    arguments: Any  # masked already
    asked_at: datetime
    expires_at: datetime | None
    buttons: tuple[PromptButton, ...]
    fields: dict[str, Any]  # sent with the chosen button
    answer_url: str
    source_label: str
    source_url: str
    hint: str = ""
    answer: str = ""  # the answer's label once answered
    answered_by: str = ""
    note: str = ""
    can_answer: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        return not self.answer

    def seconds_left(self, now: datetime | None = None) -> int | None:
        if self.expires_at is None:
            return None
        return max(0, int((self.expires_at - (now or timezone.now())).total_seconds()))


def tell_prompt_inbox() -> None:
    """Called after commit when a prompt opens or is settled. Logged, never raised: the prompt is
    saved, and an inbox reads it again on its next message or reconnect."""
    try:
        send_to_group(PROMPT_INBOX_GROUP, {"type": INBOX_MESSAGE_TYPE})
    except Exception:
        logger.exception("telling the prompt inbox failed")
