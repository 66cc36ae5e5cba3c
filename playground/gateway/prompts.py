"""A gateway call waiting under an `ask` rule as a card (playground/prompt_cards.py), and the open ones.

A prompt is open while its row is pending and its deadline has not passed: the MCP request waits
GATEWAY_PERMISSION_TIMEOUT_SECONDS at most, so a pending row past it belongs to a request that is gone.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from playground.access import ADMIN, has_role
from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession
from playground.mcp_servers.secrets import mask_arguments
from playground.prompt_cards import APPROVE_ONCE, DENY, GATEWAY, PromptCard

# The card's buttons (the conversation's choices) and the row's answers; the older field values too.
ANSWERS = {"once": GatewayPrompt.Status.ALLOWED, "deny": GatewayPrompt.Status.DENIED,
           GatewayPrompt.Status.ALLOWED: GatewayPrompt.Status.ALLOWED, GatewayPrompt.Status.DENIED: GatewayPrompt.Status.DENIED}
ANSWER_LABELS = {GatewayPrompt.Status.ALLOWED: "allowed", GatewayPrompt.Status.DENIED: "denied",
                 GatewayPrompt.Status.TIMEOUT: "denied (nobody answered in time)"}


def answer_of(choice: str) -> str | None:
    """The row's answer for a card's choice (`once`, `deny`) or a row answer sent as it is; None otherwise."""
    return ANSWERS.get(str(choice or ""))


def may_answer(user) -> bool:
    """Gateway prompts are answered by admins, as the gateway's pages and sockets are (urls.py, routing.py)."""
    return has_role(user, ADMIN)


def timeout_seconds() -> float:
    return float(settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS)


def prompt_card(prompt: GatewayPrompt, session: GatewaySession | None = None) -> PromptCard:
    session = session or prompt.session
    pending = prompt.status == GatewayPrompt.Status.PENDING
    return PromptCard(
        source=GATEWAY,
        key=f"gateway-{prompt.pk}",
        tool=prompt.tool_name,
        reason=prompt.reason,
        arguments=mask_arguments(prompt.arguments or {}),
        asked_at=prompt.created_at,
        expires_at=prompt.created_at + timedelta(seconds=timeout_seconds()),
        buttons=(APPROVE_ONCE, DENY),
        fields={"action": "answer", "source": GATEWAY, "prompt": prompt.pk},
        answer_url=reverse("gateway:prompt_answer", args=[prompt.pk]),
        source_label=f"MCP session of {session.client_name or 'an unknown client'} on {session.profile.name}",
        source_url=reverse("gateway:session_detail", args=[session.pk]),
        hint="The MCP client waits for this answer; nobody answering in time denies the call.",
        answer="" if pending else ANSWER_LABELS.get(prompt.status, prompt.status),
        answered_by=prompt.answered_by.get_username() if prompt.answered_by_id and prompt.answered_by else "",
    )


def event_card(session: GatewaySession, event: GatewayEvent) -> PromptCard | None:
    """The card of a `permission_asked` event (None when its row is gone)."""
    prompt = (GatewayPrompt.objects.select_related("answered_by")
              .filter(pk=(event.payload or {}).get("prompt_id"), session_id=session.pk).first())
    return prompt_card(prompt, session) if prompt is not None else None


def _waiting() -> QuerySet[GatewayPrompt]:
    """Pending prompts whose MCP request still waits."""
    since = timezone.now() - timedelta(seconds=timeout_seconds())
    return GatewayPrompt.objects.filter(status=GatewayPrompt.Status.PENDING, created_at__gt=since)


def open_prompts() -> list[GatewayPrompt]:
    return list(_waiting().select_related("session__profile").order_by("created_at"))


def open_prompt_count() -> int:
    return _waiting().count()


def open_prompt_cards() -> list[PromptCard]:
    return [prompt_card(prompt) for prompt in open_prompts()]
