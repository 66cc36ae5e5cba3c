"""Replay and fork: a conversation's person's messages re-sent, in a new conversation, under another
profile, search backend, vendor or wire style (docs/conversations.md, "Replay and fork").

The replay is an ordinary conversation run by the ordinary loop on Celery: `start_replay` stores its
plan (the messages to re-send, the origin's permission answers) and sends the first message; each
time one of its runs ends with the model's answer, the task sends the next (`send_next_message`). A
call that needs a person's permission takes the origin's answer when the same call — the tool and
its arguments — was answered there (`reused_answer`); any other call asks again, as always.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from playground.conversations import services
from playground.conversations.events import lock_conversation
from playground.conversations.models import Conversation, Event
from playground.conversations.runs import ACTIVE_STATUSES, PERSON_ANSWERS, ConversationError

logger = logging.getLogger(__name__)
# The runs that end with the model's answer: the next message may follow (an error or a cancel stops the replay).
FINISHED_REASONS = ("end_turn", "max_turns")
# The note on a reused answer. No conversation id: a share link's anonymous frames show it too.
REUSED_NOTE = "reused: the origin's answer to the same call (tool and arguments)"


class ReplayError(ConversationError):
    """A replay that cannot start (origin running, turn out of range, nothing to re-send); the message says why."""


@dataclass(frozen=True)
class ReplayChoice:
    """What the replay runs with. The same profile as the origin's starts from the origin's snapshot
    (the settings it ran with, not the profile's later edits); `provider` None keeps the origin's
    choice ("" is automatic); an empty `wire_style` or `search_backend` keeps the profile's."""

    profile: Any | None  # an AgentProfile, or None for the default settings
    provider: str | None = None
    wire_style: str = ""  # a profile wire style (native, client, server, tool-changes)
    search_backend: str = ""
    through: int | None = None  # re-send the person's messages 1..through (None: all of them)


def person_messages(conversation: Conversation) -> list[str]:
    """The person's messages in order, as they were sent (the chat's `message` events)."""
    return [str((payload or {}).get("text") or "") for payload in
            conversation.events.filter(type="message", payload__role="user", parent_sequence__isnull=True)
            .order_by("sequence").values_list("payload", flat=True)]


def call_key(name: str, arguments: Any) -> str:
    """One call's identity for re-using an answer: the tool and its arguments, key order aside."""
    return json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), default=str)


def origin_answers(origin: Conversation, through: int) -> list[dict[str, Any]]:
    """The person's answers to the origin's prompts made while its first `through` messages ran
    (a timeout or a cancel is no one's answer: that call asks again)."""
    events = list(origin.events.filter(type__in=("message", "permission_prompt", "permission_answer")).order_by("sequence"))
    prompts: dict[int, Event] = {}
    answers: list[dict[str, Any]] = []
    sent = 0
    for event in events:
        payload = event.payload or {}
        if event.type == "message" and payload.get("role") == "user" and not event.parent_sequence:
            sent += 1
        elif event.type == "permission_prompt" and sent <= through:
            prompts[event.sequence] = event
        elif event.type == "permission_answer" and payload.get("choice") in PERSON_ANSWERS:
            prompt = prompts.get(payload.get("prompt_sequence"))
            if prompt is not None:
                answers.append({"key": call_key(prompt.payload.get("name", ""), prompt.payload.get("arguments") or {}),
                                "name": prompt.payload.get("name", ""), "choice": payload["choice"],
                                "answered_by": payload.get("answered_by", ""), "prompt_sequence": prompt.sequence})
    return answers


def start_replay(origin: Conversation, user, choice: ReplayChoice) -> Conversation:
    """A new conversation linked to `origin`, re-sending its person's messages 1..`through` under
    `choice`; the first is sent (and queued) now, each next one when the previous run answered."""
    if origin.status in ACTIVE_STATUSES:
        raise ReplayError(f"Conversation #{origin.pk} is still running ({origin.get_status_display().lower()}): "
                          "replay it once its run has ended.")
    messages = person_messages(origin)
    if not messages:
        raise ReplayError(f"Conversation #{origin.pk} has no message of the person's to re-send.")
    through = len(messages) if choice.through is None else choice.through
    if not 1 <= through <= len(messages):
        raise ReplayError(f"Turn {through} is out of range: conversation #{origin.pk} has "
                          f"{len(messages)} message{'s' if len(messages) != 1 else ''} of the person's (1–{len(messages)}).")
    profile = choice.profile
    provider = origin.provider if choice.provider is None else choice.provider
    plan = {"origin": origin.pk, "messages": messages[:through], "sent": 0,
            "answers": origin_answers(origin, through),
            "changes": {"profile": getattr(profile, "name", "") or "default settings", "provider": provider,
                        "wire_style": choice.wire_style, "search_backend": choice.search_backend, "through": through}}
    with transaction.atomic():
        try:
            replay = services.start_conversation(user, profile=profile, provider=provider, wire_style=choice.wire_style,
                                                 title=f"Replay: {str(origin)[:70]}", kind=Conversation.Kind.REPLAY)
        except ReplayError:
            raise
        except ConversationError as refused:  # a budget of the person or the profile is reached
            raise ReplayError(str(refused)) from refused  # no id: share links show titles
        snapshot = dict(replay.profile_snapshot)
        if profile is not None and profile.pk == origin.profile_id and origin.profile_snapshot:
            snapshot = {**origin.profile_snapshot, **({"wire_style": choice.wire_style} if choice.wire_style else {})}
        if choice.search_backend:
            snapshot["search_backend"] = choice.search_backend
        Conversation.objects.filter(pk=replay.pk).update(replay_of=origin, replay_plan=plan, profile_snapshot=snapshot)
        replay.replay_of, replay.replay_plan, replay.profile_snapshot = origin, plan, snapshot
        send_next_message(replay.pk)
    replay.refresh_from_db()
    return replay


def send_next_message(conversation_id: int) -> bool:
    """Send the replay's next message if one is left and the conversation takes it (its last run
    answered); False otherwise. Called by the Celery task after a run ends (tasks.py)."""
    if not Conversation.objects.filter(pk=conversation_id, replay_plan__isnull=False).exists():
        return False  # not a replay (most runs): no row lock taken
    with transaction.atomic():
        locked = lock_conversation(conversation_id)
        plan = locked.replay_plan or {}
        messages, sent = list(plan.get("messages") or []), int(plan.get("sent") or 0)
        if sent >= len(messages) or locked.status not in (Conversation.Status.IDLE,):
            return False
        Conversation.objects.filter(pk=locked.pk).update(replay_plan={**plan, "sent": sent + 1})
        try:
            services.send_message(locked, messages[sent], user=locked.owner)
        except ConversationError:
            logger.warning("replay %s: message %d was not taken", conversation_id, sent + 1, exc_info=True)
            transaction.set_rollback(True)
            return False
    return True


def reused_answer(conversation: Conversation, name: str, arguments: Any) -> dict[str, Any] | None:
    """The origin's answer to this same call (tool and arguments), when `conversation` is a replay of one."""
    plan = conversation.replay_plan or {}
    key = call_key(name, arguments)
    return next((answer for answer in plan.get("answers") or [] if answer.get("key") == key), None)


def progress(conversation: Conversation) -> dict[str, Any] | None:
    """For the page: how far the replay got (messages sent of planned), and what it changed."""
    plan = conversation.replay_plan
    if not plan:
        return None
    planned, sent = len(plan.get("messages") or []), int(plan.get("sent") or 0)
    return {"origin": plan.get("origin"), "sent": sent, "planned": planned, "changes": plan.get("changes") or {},
            "reusable_answers": len(plan.get("answers") or []),
            "done": sent >= planned and conversation.status == Conversation.Status.IDLE,
            # a run that failed or was cancelled ends the replay there (its last message's included)
            "stopped": conversation.status in (Conversation.Status.FAILED, Conversation.Status.CANCELLED)}
