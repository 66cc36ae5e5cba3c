"""A conversation's permission prompts as cards (playground/prompt_cards.py), and the ones still open.

A prompt is open while its run is paused on it: the conversation waits, its `paused_run` names the
prompt, and no answer is saved (the same reading as the deadline sweep, requeue.overdue_prompts).
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from playground.conversations.models import Conversation, Event
from playground.mcp_servers.secrets import mask_arguments
from playground.prompt_cards import ALWAYS, APPROVE_ONCE, CONVERSATION, DENY, PromptCard

ANSWER_LABELS = {"once": "approved once", "always": "always allowed", "deny": "denied", "timeout": "denied (nobody answered in time)"}


def prompt_card(conversation: Conversation, prompt: Event, answer: Event | None = None, *,
                shared: bool = False) -> PromptCard:
    """`conversation` needs only its pk (and its title for the inbox); `shared`: a share link's page,
    which shows no buttons and no account name."""
    payload = prompt.payload or {}
    timeout = float(payload.get("timeout_seconds") or settings.PERMISSION_PROMPT_TIMEOUT_SECONDS)
    answered = (answer.payload or {}) if answer is not None else {}
    return PromptCard(
        source=CONVERSATION,
        # A share link's page holds no internal id (sharing.py).
        key=f"conversation-{'shared' if shared else conversation.pk}-{prompt.sequence}",
        tool=str(payload.get("name") or ""),
        reason=str(payload.get("reason") or ""),
        arguments=mask_arguments(payload.get("arguments") or {}),
        asked_at=prompt.created_at,
        expires_at=prompt.created_at + timedelta(seconds=timeout) if prompt.created_at else None,
        buttons=(APPROVE_ONCE, ALWAYS, DENY),
        fields={} if shared else {"action": "answer", "source": CONVERSATION, "conversation": conversation.pk,
                                  "prompt": prompt.sequence},
        answer_url=reverse("conversations:answer", args=[conversation.pk]) if not shared else "",
        source_label=str(conversation.title or f"Conversation {conversation.pk}") if not shared else "",
        source_url=reverse("conversations:detail", args=[conversation.pk]) if not shared else "",
        hint=(f"“Always” lasts for this conversation only; a permission rule makes it permanent. "
              f"Denied automatically after {timeout:.0f} s."),
        answer=ANSWER_LABELS.get(answered.get("choice", ""), answered.get("choice", "")) if answer is not None else "",
        answered_by="" if shared else str(answered.get("answered_by") or ""),
        note=str(answered.get("note") or ""),
        can_answer=not shared,
        extra={"choice": answered.get("choice", "")},
    )


def open_prompt_events(conversations: QuerySet[Conversation]) -> list[tuple[Conversation, Event]]:
    """(conversation, prompt event) of the open prompts of `conversations`, oldest first. Three reads
    whatever their number: the paused conversations, their prompts, the answers given since."""
    paused = {c.pk: c for c in conversations.filter(status=Conversation.Status.WAITING, paused_run__isnull=False)}
    if not paused:
        return []
    wanted = {pk: (c.paused_run or {}).get("prompt_sequence") for pk, c in paused.items()}
    prompts = [p for p in Event.objects.filter(conversation_id__in=list(paused), type="permission_prompt",
                                               sequence__in={s for s in wanted.values() if isinstance(s, int)})
               if wanted.get(p.conversation_id) == p.sequence]
    if not prompts:
        return []
    answered = set(Event.objects.filter(conversation_id__in=[p.conversation_id for p in prompts], type="permission_answer",
                                        created_at__gte=min(p.created_at for p in prompts))
                   .values_list("conversation_id", "payload__prompt_sequence"))
    open_ = [(paused[p.conversation_id], p) for p in prompts if (p.conversation_id, p.sequence) not in answered]
    return sorted(open_, key=lambda pair: (pair[1].created_at, pair[1].pk))


def open_prompts(conversations: QuerySet[Conversation]) -> list[PromptCard]:
    """Cards of the open prompts of `conversations`, oldest first."""
    return [prompt_card(conversation, prompt) for conversation, prompt in open_prompt_events(conversations)]


def open_prompt_count(conversations: QuerySet[Conversation]) -> int:
    return len(open_prompt_events(conversations))
