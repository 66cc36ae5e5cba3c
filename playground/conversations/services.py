"""What a person does with conversations: start one, send a message, answer a prompt, cancel.

Views and the consumer call these (and nothing lower). The run these start, pause and end moves
through its lifecycle in `runs.py` (queue, claim, pause / resume, release, requeue), which the loop,
the lease, the watch and the Celery tasks call too.
"""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Max

from playground.access import role_of
from playground.conversations import budgets, runs
from playground.conversations.events import (
    ActedForOwner,
    ChatMessage,
    StatusChanged,
    lock_conversation,
    record_event,
)
from playground.conversations.models import Conversation, Event, Message
from playground.conversations.runs import ConversationError
from playground.engine.history import text_block

MAX_MESSAGE_CHARS = 20_000
# A person's answers to a permission prompt, with the labels the answer form offers.
PERMISSION_CHOICES = {"once": "Approve once", "always": "Always", "deny": "Deny"}  # runs.PERSON_ANSWERS
SNAPSHOT_FIELDS = (
    "name", "system_prompt", "model", "tool_search_mode", "wire_style", "search_backend", "max_results",
    "announcement_style", "announcement_layout", "announcement_budget", "prompt_cache", "prompt_cache_ttl", "load_on_call",
    "tool_changes_k", "tool_changes_min_score", "tool_changes_search", "allowed_tools", "disallowed_tools", "is_subagent",
)


def profile_snapshot(profile: Any | None) -> dict[str, Any]:
    if profile is None:
        return {}
    snapshot = {name: getattr(profile, name) for name in SNAPSHOT_FIELDS if hasattr(profile, name)}
    snapshot["id"] = profile.pk
    provider = getattr(profile, "provider", "")
    if provider:
        snapshot["provider"] = provider
    return snapshot


def start_conversation(owner, *, profile=None, provider: str = "", title: str = "", compare_group: str = "",
                       wire_style: str = "", kind: str = "") -> Conversation:
    """A new conversation with `profile` (None: the default settings). `wire_style` (compare's
    per-side choice): the profile's wire style for this conversation only, kept in its snapshot.
    Refused (ConversationError) when a budget of the owner or the profile is reached; a task run's
    conversations are not refused one by one (the run was checked when it started: budgets.py)."""
    kind = kind or (Conversation.Kind.COMPARE if compare_group else Conversation.Kind.INTERACTIVE)
    if kind != Conversation.Kind.TASK_RUN:
        check_budget(owner, profile)
    snapshot = profile_snapshot(profile)
    if wire_style:
        snapshot = {**snapshot, "wire_style": wire_style}
    return Conversation.objects.create(
        owner=owner,
        profile=profile,
        profile_snapshot=snapshot,
        provider=provider,
        title=title[:200],
        compare_group=compare_group,
        kind=kind,
    )


def check_budget(owner, profile) -> None:
    """ConversationError when new work for `owner` under `profile` would pass a reached budget."""
    reason = budgets.refusal(owner, profile)
    if reason:
        raise ConversationError(reason)


def new_compare_group() -> str:
    return str(uuid.uuid4())


def record_acting_for_owner(locked: Conversation, user, action: str, detail: str = "") -> None:
    """Inside the caller's transaction: when `user` is not the conversation's owner (an admin acting
    in someone else's conversation), record who did what, so the owner sees it on their page."""
    if user is None or not getattr(user, "pk", None) or user.pk == locked.owner_id:
        return
    record_event(locked, ActedForOwner(actor=user.get_username(), actor_role=role_of(user) or "", action=action, detail=detail))


def send_message(conversation: Conversation, text: str, *, user=None, enqueue: bool = True) -> Message:
    """Store the person's message, mark the conversation running and queue the loop after commit."""
    text = (text or "").strip()
    if not text:
        raise ConversationError("The message is empty.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ConversationError(f"The message is too long ({len(text)} characters; at most {MAX_MESSAGE_CHARS}).")
    if conversation.kind != Conversation.Kind.TASK_RUN:
        check_budget(conversation.owner, conversation.profile)
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        if runs.run_is_lost(locked):
            runs.release(locked)  # its worker is gone: the person need not cancel first
        if locked.status not in (Conversation.Status.IDLE, Conversation.Status.FAILED, Conversation.Status.CANCELLED):
            raise ConversationError(f"The agent is still working ({locked.get_status_display().lower()}); wait or cancel first.")
        position = (locked.messages.aggregate(m=Max("position"))["m"] or 0) + 1
        message = Message.objects.create(
            conversation=locked, position=position, role="user", content=[text_block(text)]
        )
        if not locked.title:
            Conversation.objects.filter(pk=locked.pk).update(title=text[:80])
        run_token = runs.begin_run(locked)
        record_event(locked, ChatMessage(role="user", text=text, author=getattr(user, "username", "")),
                     status=Conversation.Status.RUNNING)
        record_acting_for_owner(locked, user, "sent a message")
        if enqueue:
            transaction.on_commit(lambda: runs.queue_run(locked.pk, run_token))
    conversation.status = Conversation.Status.RUNNING
    conversation.run_token, conversation.heartbeat_at = run_token, None
    return message


def answer_permission(conversation: Conversation, prompt_sequence: int, choice: str, *, user=None, note: str = "",
                      resume: bool = True) -> Event:
    """A person's answer to a permission prompt (`runs.answer_prompt`: the first answer wins, `always`
    is remembered, a paused run is resumed), and who answered when it is not the owner."""
    with transaction.atomic():
        prompt, answer = runs.answer_prompt(conversation, prompt_sequence, choice, answered_by=getattr(user, "username", ""),
                                            note=note, resume=resume)
        record_acting_for_owner(lock_conversation(conversation.pk), user, "answered your permission prompt",
                                f"#{prompt_sequence} {prompt.payload.get('name', '')}: {PERMISSION_CHOICES.get(choice, choice)}")
    return answer


def request_cancel(conversation: Conversation, *, user=None) -> bool:
    """Cancel the run: at once when no worker holds it (queued, or paused on a prompt), else ask the
    worker, whose watcher (lease.py) interrupts the model call or tool call in flight. False when
    nothing is running."""
    who = getattr(user, "username", "") or ""
    if conversation.kind != Conversation.Kind.TASK_RUN:
        check_budget(conversation.owner, conversation.profile)
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        if runs.run_is_lost(locked):
            runs.release(locked)  # the worker is gone: nobody would act on the cancel
            record_acting_for_owner(locked, user, "cancelled the run")
            conversation.status = locked.status
            return True
        if locked.status == Conversation.Status.CANCELLING and locked.heartbeat_at is None:
            # A cancel is waiting on a run no worker holds (the broker lost its task): free it now.
            if locked.paused_run:  # an answered prompt whose resumption no worker took: close its turn
                Conversation.objects.filter(pk=locked.pk).update(paused_run=None)
                runs.close_cancelled_turn(locked.pk, locked.paused_run)
            Conversation.objects.filter(pk=locked.pk).update(run_token="")
            runs.record_cancelled(locked, "queued", requested_by=who or runs.cancel_requester(locked.pk),
                             note="no worker answered the cancel request")
            record_acting_for_owner(locked, user, "cancelled the run")
            conversation.status = Conversation.Status.CANCELLED
            return True
        if locked.status not in (Conversation.Status.RUNNING, Conversation.Status.WAITING):
            return False
        if locked.status == Conversation.Status.RUNNING and locked.heartbeat_at is None:
            # No worker has claimed the run (queued, or lost with the broker): end it now. Its task,
            # should it still arrive, finds the run token cleared and does nothing.
            if locked.paused_run:  # an answered prompt whose resumption no worker took yet
                runs.end_paused_run(locked, requested_by=who, note=f"the run was cancelled by {who or 'someone'}")
            else:
                Conversation.objects.filter(pk=locked.pk).update(run_token="")
                runs.record_cancelled(locked, "queued", requested_by=who)
            record_acting_for_owner(locked, user, "cancelled the run")
            conversation.status = Conversation.Status.CANCELLED
            return True
        if locked.status == Conversation.Status.WAITING and locked.paused_run:
            # Paused on a prompt: no worker would see the cancel, so the run ends here and now.
            runs.end_paused_run(locked, requested_by=who, note=f"the run was cancelled by {who or 'someone'}")
            record_acting_for_owner(locked, user, "cancelled the run")
            conversation.status = Conversation.Status.CANCELLED
            return True
        record_event(locked, StatusChanged(status=Conversation.Status.CANCELLING,
                                           note=f"cancel requested by {who or 'someone'}", by=who),
                     status=Conversation.Status.CANCELLING)
        record_acting_for_owner(locked, user, "cancelled the run")
    conversation.status = Conversation.Status.CANCELLING
    return True


ALREADY_ENDED = {
    Conversation.Status.IDLE: "The run had already finished before your cancel arrived: the answer above is complete, "
                              "nothing was cancelled.",
    Conversation.Status.CANCELLED: "The run had already been cancelled: nothing more to cancel.",
    Conversation.Status.CANCELLING: "A cancel is already under way: the run stops at its next step.",
    Conversation.Status.FAILED: "The run had already ended with an error: nothing to cancel.",
}


def nothing_to_cancel(conversation: Conversation) -> str:
    """What to tell the person whose cancel found no run to stop (request_cancel returned False):
    most often the answer arrived just before the click, and the page must say so."""
    status = Conversation.objects.filter(pk=conversation.pk).values_list("status", flat=True).first()
    return ALREADY_ENDED.get(status, "Nothing is running: there is nothing to cancel.")


