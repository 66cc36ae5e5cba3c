"""Services that change conversations: start one, send a message, answer a prompt, cancel.

Views and the consumer call these (and nothing lower); the Celery task calls `loop.run_conversation`.
"""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Max

from playground.conversations.events import ChatMessage, PermissionAnswer, StatusChanged, lock_conversation, record_event
from playground.conversations.models import Conversation, Event, Message

MAX_MESSAGE_CHARS = 20_000
PERMISSION_CHOICES = ("once", "always", "deny")
SNAPSHOT_FIELDS = (
    "name", "system_prompt", "model", "tool_search_mode", "wire_style", "search_backend", "max_results",
    "announcement_style", "allowed_tools", "disallowed_tools", "is_subagent",
)


class ConversationError(ValueError):
    """A request the conversation cannot take now (busy, empty message, unknown prompt); the message says why."""


def profile_snapshot(profile: Any | None) -> dict[str, Any]:
    if profile is None:
        return {}
    snapshot = {name: getattr(profile, name) for name in SNAPSHOT_FIELDS if hasattr(profile, name)}
    snapshot["id"] = profile.pk
    provider = getattr(profile, "provider", "")
    if provider:
        snapshot["provider"] = provider
    return snapshot


def start_conversation(owner, *, profile=None, provider: str = "", title: str = "", compare_group: str = "") -> Conversation:
    return Conversation.objects.create(
        owner=owner,
        profile=profile,
        profile_snapshot=profile_snapshot(profile),
        provider=provider,
        title=title[:200],
        compare_group=compare_group,
    )


def new_compare_group() -> str:
    return str(uuid.uuid4())


def send_message(conversation: Conversation, text: str, *, user=None, enqueue: bool = True) -> Message:
    """Store the person's message, mark the conversation running and queue the loop after commit."""
    text = (text or "").strip()
    if not text:
        raise ConversationError("The message is empty.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ConversationError(f"The message is too long ({len(text)} characters; at most {MAX_MESSAGE_CHARS}).")
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        if locked.status not in (Conversation.Status.IDLE, Conversation.Status.FAILED):
            raise ConversationError(f"The agent is still working ({locked.get_status_display().lower()}); wait or cancel first.")
        position = (locked.messages.aggregate(m=Max("position"))["m"] or 0) + 1
        message = Message.objects.create(
            conversation=locked, position=position, role="user", content=[{"type": "text", "text": text}]
        )
        if not locked.title:
            Conversation.objects.filter(pk=locked.pk).update(title=text[:80])
        record_event(locked, ChatMessage(role="user", text=text, author=getattr(user, "username", "")),
                     status=Conversation.Status.RUNNING)
        if enqueue:
            from playground.conversations.tasks import run_conversation_task

            transaction.on_commit(lambda: run_conversation_task.delay(locked.pk))
    conversation.status = Conversation.Status.RUNNING
    return message


def answer_permission(conversation: Conversation, prompt_sequence: int, choice: str, *, user=None, note: str = "") -> Event:
    """Record the answer to a permission prompt; the first answer wins (the loop's timeout included).

    `always` also remembers the tool for this conversation, so later calls do not ask again.
    """
    if choice not in (*PERMISSION_CHOICES, "timeout"):
        raise ConversationError(f"Unknown answer {choice!r}: choose once, always or deny.")
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        prompt = locked.events.filter(sequence=prompt_sequence, type="permission_prompt").first()
        if prompt is None:
            raise ConversationError(f"There is no permission prompt #{prompt_sequence} in this conversation.")
        if pending_answer(locked.pk, prompt_sequence) is not None:
            raise ConversationError("This prompt has already been answered.")
        if choice == "always":
            allowed = list(locked.always_allowed or [])
            if prompt.payload.get("name") not in allowed:
                allowed.append(prompt.payload.get("name"))
                Conversation.objects.filter(pk=locked.pk).update(always_allowed=allowed)
        return record_event(
            locked,
            PermissionAnswer(prompt_sequence=prompt_sequence, choice=choice, answered_by=getattr(user, "username", ""), note=note),
            parent_sequence=prompt.parent_sequence,
            turn_sequence=prompt.turn_sequence,
            status=Conversation.Status.RUNNING if locked.status == Conversation.Status.WAITING else None,
        )


def pending_answer(conversation_id: int, prompt_sequence: int) -> Event | None:
    return (
        Event.objects.filter(conversation_id=conversation_id, type="permission_answer", payload__prompt_sequence=prompt_sequence)
        .order_by("sequence")
        .first()
    )


def request_cancel(conversation: Conversation, *, user=None) -> bool:
    """Ask the loop to stop at its next step. False when nothing is running."""
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        if locked.status not in (Conversation.Status.RUNNING, Conversation.Status.WAITING):
            return False
        record_event(locked, StatusChanged(status=Conversation.Status.CANCELLING,
                                           note=f"cancel requested by {getattr(user, 'username', 'someone')}"),
                     status=Conversation.Status.CANCELLING)
    conversation.status = Conversation.Status.CANCELLING
    return True
