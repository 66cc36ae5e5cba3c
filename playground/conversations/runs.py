"""The run lifecycle of a conversation: queue, claim, pause / resume, cancel's end, release, requeue.

What a person does (start, send, answer, cancel) is `services.py`; it and the parts that move a run
along — the loop (loop.py), the lease that claims and keeps it (lease.py), the watch for runs and
prompts nobody took (requeue.py) and the Celery tasks (tasks.py) — call these, and nothing here
imports them back. A run is named by its run token: `begin_run` draws one, `queue_run` hands it to a
worker by the task's registered name (`playground.queueing.queue_task`), the worker's `RunLease`
claims it, a run that meets an "ask" rule pauses (`take_paused_run` hands the saved state to the one
worker resuming it once `answer_prompt` has an answer), a worker gone silent gets its run released
(`release_lost_runs`) — and may go on from what it stored (`continue_lost_run`) —, and a run no
worker took is queued again under a new token (`requeue_unclaimed_run`). docs/conversations.md describes each path.
"""
from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from playground.conversations.events import (
    ErrorEvent,
    PermissionAnswer,
    RunCancelled,
    StatusChanged,
    TurnFinished,
    lock_conversation,
    record_event,
)
from playground.conversations.models import Conversation, Event, Message
from playground.engine.execution import error_tool_result
from playground.queueing import queue_task

logger = logging.getLogger(__name__)

# The answers a permission prompt can get: a person's (`services.PERMISSION_CHOICES`) and the loop's own.
PERSON_ANSWERS = ("once", "always", "deny")
LOOP_ANSWERS = ("timeout", "cancelled")  # recorded by the runs' lifecycle itself, never offered to people


class ConversationError(ValueError):
    """A request the conversation cannot take now (busy, empty message, unknown prompt); the message says why."""


# -- queue -----------------------------------------------------------------------------------------
def begin_run(locked: Conversation) -> str:
    """Inside the caller's transaction, with the row locked: a new run owns the conversation from here,
    and no worker has claimed it yet (lease.py). Returns its run token; `queue_run` after commit."""
    run_token = uuid.uuid4().hex
    # queued_at is the request's time: the grace for a worker to claim the run counts from here.
    Conversation.objects.filter(pk=locked.pk).update(run_token=run_token, heartbeat_at=None,
                                                     queued_at=timezone.now(), queue_attempts=0)
    return run_token


def queue_run(conversation_id: int, run_token: str = "", *, fail_unsent: bool = True) -> None:
    """Hand the run to a Celery worker; with the broker unreachable, say so instead of spinning forever.

    `fail_unsent=False` (a re-send, `requeue_unclaimed_run`): a failed send leaves the run queued for the next round.
    """
    try:
        queue_task("conversations.run_conversation", conversation_id, run_token)
    except Exception as exc:
        logger.exception("could not queue the run of conversation %s", conversation_id)
        if not fail_unsent:
            return
        record_event(conversation_id, ErrorEvent(message=f"Could not hand the message to a worker (is Redis running?): {exc}",
                                                 kind="queue"), status=Conversation.Status.FAILED)


def queue_resume(conversation_id: int, run_token: str, prompt_sequence: int, *, resend: bool = False) -> None:
    """Hand a run paused on `prompt_sequence` (now answered) back to a worker. The answer is recorded
    already, so a failed send (the broker down) never loses it: the resumption stays queued (running,
    unclaimed) and the background round hands it over once the broker is back (requeue.py). The
    first failed send tells the page so; a re-send that fails is tried again by the next round."""
    try:
        queue_task("conversations.resume_conversation", conversation_id, run_token, prompt_sequence)
    except Exception:
        logger.exception("could not queue the resumption of conversation %s", conversation_id)
        if not resend:
            record_event(conversation_id, StatusChanged(
                status=Conversation.Status.RUNNING,
                note="the answer is kept: the message broker (Redis) does not answer right now, and the run "
                     "goes on once it is back"))


# -- pause / resume: runs paused on a permission prompt (loop.AgentRun.pause) ----------------------
CANCELLED_CALL = "Cancelled by the person before this call ran."
CANCELLED_WAITING_SUBAGENT = "Cancelled by the person while it ran: its subagent was waiting for a permission answer."


def answer_prompt(conversation: Conversation | int, prompt_sequence: int, choice: str, *, answered_by: str = "",
                  note: str = "", resume: bool = True) -> tuple[Event, Event]:
    """Record the answer to a permission prompt; the first answer wins (the scheduled timeout included).
    Returns (the prompt, the answer); raises ConversationError for an unknown prompt or choice, or one answered.

    `always` also remembers the tool for this conversation, so later calls do not ask again. A waiting
    conversation goes back to running, unless `resume=False` (the run is ending: its caller sets the status).
    When the run is paused on this prompt (no worker holds it), a worker is asked to resume it after
    commit; with the broker down the answer waits for it (`queue_resume`).
    """
    if choice not in (*PERSON_ANSWERS, *LOOP_ANSWERS):
        raise ConversationError(f"Unknown answer {choice!r}: choose once, always or deny.")
    conversation_id = conversation if isinstance(conversation, int) else conversation.pk
    with transaction.atomic():
        locked = lock_conversation(conversation_id)
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
        answer = record_event(
            locked,
            PermissionAnswer(prompt_sequence=prompt_sequence, choice=choice, answered_by=answered_by, note=note),
            parent_sequence=prompt.parent_sequence,
            turn_sequence=prompt.turn_sequence,
            status=Conversation.Status.RUNNING if resume and locked.status == Conversation.Status.WAITING else None,
        )
        paused = locked.paused_run or {}
        if resume and paused.get("prompt_sequence") == prompt_sequence:
            run_token = locked.run_token
            Conversation.objects.filter(pk=locked.pk).update(queued_at=timezone.now(), queue_attempts=0)
            transaction.on_commit(lambda: queue_resume(locked.pk, run_token, prompt_sequence))
        return prompt, answer


def pending_answer(conversation_id: int, prompt_sequence: int) -> Event | None:
    return (
        Event.objects.filter(conversation_id=conversation_id, type="permission_answer", payload__prompt_sequence=prompt_sequence)
        .order_by("sequence")
        .first()
    )


def expire_prompt(conversation_id: int, prompt_sequence: int) -> bool:
    """Deny a prompt nobody answered in time; False when it was answered (or is gone) meanwhile.
    Called by the deadline sweep (requeue.py) and by `expire_permission_prompt_task`."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    prompt = Event.objects.filter(conversation_id=conversation_id, sequence=prompt_sequence, type="permission_prompt").first()
    if conversation is None or prompt is None:
        return False
    timeout = float(prompt.payload.get("timeout_seconds") or settings.PERMISSION_PROMPT_TIMEOUT_SECONDS)
    try:
        answer_prompt(conversation, prompt_sequence, "timeout", note=f"no answer within {timeout:g} s: denied")
    except ConversationError:
        return False  # answered first: theirs wins
    return True


def take_paused_run(conversation_id: int, run_token: str, prompt_sequence: int) -> dict[str, Any] | None:
    """Hand the paused state to the one worker resuming it (cleared, so a duplicate delivery finds nothing)."""
    with transaction.atomic():
        locked = lock_conversation(conversation_id)
        state = locked.paused_run
        if not state or locked.run_token != run_token or state.get("prompt_sequence") != prompt_sequence:
            return None
        Conversation.objects.filter(pk=conversation_id).update(paused_run=None)
    return state


def close_paused_turn(conversation_id: int, state: dict[str, Any], text: str, *, running_text: str = "") -> None:
    """Store the paused turn's tool results — those that ran, and `text` as the error of the rest —
    so the history stays valid for the next message (every tool_use gets its tool_result).

    When the run paused inside a subagent (`child`), its `Agent` call had started: it gets
    `running_text` instead (when given), since "before this call ran" would not be true of it."""
    results = list(state.get("results") or [])
    answered = {r.get("tool_use_id") for r in results}
    tool_uses = state.get("tool_uses") or []
    running_id = ""
    if running_text and "child" in state and 0 <= state.get("index", -1) < len(tool_uses):
        running_id = tool_uses[state["index"]].get("id", "")
    results.extend(error_tool_result(b["id"], running_text if b.get("id") == running_id else text)
                   for b in tool_uses if b.get("id") not in answered)
    position = (Message.objects.filter(conversation_id=conversation_id).aggregate(m=Max("position"))["m"] or 0) + 1
    Message.objects.create(conversation_id=conversation_id, position=position, role="user",
                           content=results + list(state.get("siblings") or []))


def close_cancelled_turn(conversation_id: int, state: dict[str, Any]) -> None:
    """`close_paused_turn` for a cancel: calls that never ran say so, and an `Agent` call whose
    subagent waited on the prompt says it was cut short while it ran."""
    close_paused_turn(conversation_id, state, CANCELLED_CALL, running_text=CANCELLED_WAITING_SUBAGENT)


def end_paused_run(locked: Conversation, *, note: str, requested_by: str = "") -> None:
    """Inside the caller's transaction, with the row locked: cancel a run paused on a prompt."""
    state = locked.paused_run or {}
    Conversation.objects.filter(pk=locked.pk).update(paused_run=None, run_token="", heartbeat_at=None)
    locked.paused_run, locked.run_token, locked.heartbeat_at = None, "", None
    prompt_sequence = state.get("prompt_sequence")
    if prompt_sequence and pending_answer(locked.pk, prompt_sequence) is None:
        answer_prompt(locked, prompt_sequence, "cancelled", note=note, resume=False)
    close_cancelled_turn(locked.pk, state)
    record_cancelled(locked, "waiting_permission", requested_by=requested_by, interrupted=_paused_call_name(state),
                     note="while the run waited for a permission answer")


def _paused_call_name(state: dict[str, Any]) -> str:
    """The call the paused run waits on (the innermost frame: a subagent's own call nests as `child`)."""
    while "child" in state:
        state = state["child"]
    return (state.get("call") or {}).get("name", "")


# -- a run ended by a cancel -----------------------------------------------------------------------
def record_cancelled(conversation: Conversation | int, stage: str, *, requested_by: str = "", interrupted: str = "",
                     note: str = "", after_ms: float | None = None, run_token: str = "") -> None:
    """The run ended by a cancel: the `cancelled` event (chat and timeline) and the final turn_finished,
    leaving the conversation "cancelled" (it takes the next message)."""
    status = Conversation.Status.CANCELLED
    # One transaction: nobody sees the "cancelled" status without the final turn_finished beside it.
    with transaction.atomic():
        record_event(conversation, RunCancelled(stage=stage, interrupted=interrupted, requested_by=requested_by,
                                                note=note, after_ms=after_ms), status=status, run_token=run_token)
        record_event(conversation, TurnFinished(turn=0, stop_reason="cancelled", status=status, final=True,
                                                reason="cancelled"), status=status, run_token=run_token)


def cancel_requester(conversation_id: int) -> str:
    """Who asked for the cancel a worker is acting on (the latest "cancelling" status event says)."""
    asked = (Event.objects.filter(conversation_id=conversation_id, type="status", payload__status=Conversation.Status.CANCELLING)
             .order_by("-sequence").first())
    return (asked.payload.get("by") or "") if asked is not None else ""


# -- requeue: runs no worker took (requeue.py watches for them) ------------------------------------
QUEUE_LOST_CALL = "Not run: no worker took this run (the broker lost its task)."


def requeue_unclaimed_run(conversation_id: int, seen_token: str) -> str:
    """Hand a run no worker claimed back to the broker under a new token, or fail it once the re-sends
    are used up. The caller saw `seen_token` unclaimed and not held by the broker; re-checked here under
    the row lock. Returns "requeued", "failed" or "" (claimed, cancelled or re-sent by someone else meanwhile).

    The new token makes the lost task harmless should it turn up after all (a Redis that kept it, a
    worker that had it and comes back): it finds the token changed and does nothing.
    """
    with transaction.atomic():
        locked = lock_conversation(conversation_id)
        if (locked.status != Conversation.Status.RUNNING or locked.heartbeat_at is not None
                or not locked.run_token or locked.run_token != seen_token):
            return ""
        paused = locked.paused_run or {}
        waited = int((timezone.now() - locked.queued_at).total_seconds()) if locked.queued_at else 0
        if locked.queue_attempts >= settings.AGENT_QUEUE_ATTEMPTS:
            Conversation.objects.filter(pk=locked.pk).update(run_token="", paused_run=None, queued_at=None)
            if paused:  # an answered prompt whose resumption no worker took: close its turn
                close_paused_turn(locked.pk, paused, QUEUE_LOST_CALL)
            tries = "" if not locked.queue_attempts else f", also after it was handed over again {locked.queue_attempts} time(s)"
            record_event(locked, ErrorEvent(
                message=f"No worker started this run: the message broker lost its task (was Redis restarted?) "
                        f"and no worker took it within {waited} s{tries}. Send the message again to retry.",
                kind="queue_lost"), status=Conversation.Status.FAILED)
            return "failed"
        run_token = uuid.uuid4().hex
        Conversation.objects.filter(pk=locked.pk).update(run_token=run_token, queued_at=timezone.now(),
                                                         queue_attempts=locked.queue_attempts + 1)
        record_event(locked, StatusChanged(
            status=Conversation.Status.RUNNING,
            note=f"no worker took the run within {waited} s and the broker no longer held its task "
                 f"(was Redis restarted?): handed to a worker again "
                 f"({locked.queue_attempts + 1} of {settings.AGENT_QUEUE_ATTEMPTS})"))
        # Sent unless the broker went away again since it was asked; then the next round tries again.
        if paused.get("prompt_sequence"):
            transaction.on_commit(lambda: queue_resume(locked.pk, run_token, paused["prompt_sequence"], resend=True))
        else:
            transaction.on_commit(lambda: queue_run(locked.pk, run_token, fail_unsent=False))
    return "requeued"


# -- release: runs whose worker is gone (lease.py), and going on with them ---------------------------
ACTIVE_STATUSES = (Conversation.Status.RUNNING, Conversation.Status.WAITING, Conversation.Status.CANCELLING)
WORKER_LOST = "worker_lost"  # the error kind `release` records


def run_is_lost(conversation: Conversation) -> bool:
    """A worker claimed this run, and its heartbeat is older than AGENT_LOST_SECONDS."""
    return (
        conversation.status in ACTIVE_STATUSES
        and conversation.heartbeat_at is not None
        and timezone.now() - conversation.heartbeat_at > timedelta(seconds=settings.AGENT_LOST_SECONDS)
    )


def release_lost_run(conversation: Conversation) -> bool:
    """Free `conversation` when its worker is gone; True when it was released now."""
    if not run_is_lost(conversation):
        return False
    with transaction.atomic():
        locked = lock_conversation(conversation.pk)
        if not run_is_lost(locked):
            return False  # the worker wrote a heartbeat meanwhile, or someone else released it
        release(locked)
    conversation.status, conversation.run_token, conversation.heartbeat_at = locked.status, "", None
    return True


def release_lost_runs() -> int:
    """Release every conversation whose worker is gone; how many were."""
    cutoff = timezone.now() - timedelta(seconds=settings.AGENT_LOST_SECONDS)
    released = 0
    for conversation in Conversation.objects.filter(status__in=ACTIVE_STATUSES, heartbeat_at__lt=cutoff):
        if release_lost_run(conversation):  # re-checked under the row lock
            logger.warning("conversation %s: its worker stopped answering; the run was released", conversation.pk)
            released += 1
    return released


def release(locked: Conversation) -> None:
    """Inside the caller's transaction, with the row locked: end a run whose worker is gone.

    The history stays valid for the next message (every tool_use gets a tool_result), an open
    permission prompt is closed, and the page is told why. A cancel that was waiting ends cancelled,
    anything else failed.
    """
    silent = int((timezone.now() - locked.heartbeat_at).total_seconds()) if locked.heartbeat_at else 0
    was_cancelling = locked.status == Conversation.Status.CANCELLING
    Conversation.objects.filter(pk=locked.pk).update(run_token="", heartbeat_at=None, paused_run=None)
    locked.run_token, locked.heartbeat_at = "", None
    if locked.paused_run:  # keep the results of the calls that ran before the prompt
        close_paused_turn(locked.pk, locked.paused_run, "Not run: the worker running this conversation stopped answering.")
        locked.paused_run = None
    _answer_unanswered_calls(locked.pk, "Not run: the worker running this conversation stopped answering.")
    for prompt in locked.events.filter(type="permission_prompt").order_by("sequence"):
        if pending_answer(locked.pk, prompt.sequence) is None:
            answer_prompt(locked, prompt.sequence, "cancelled", note="the worker running this conversation was lost",
                          resume=False)
    record_event(
        locked,
        ErrorEvent(message=f"The worker running this conversation stopped answering (no heartbeat for {silent} s), "
                           "so the run was stopped." + ("" if was_cancelling else " Send the message again to retry."),
                   kind=WORKER_LOST),
        status=Conversation.Status.CANCELLED if was_cancelling else Conversation.Status.FAILED,
    )


def worker_losses(conversation_id: int) -> int:
    """How many of this conversation's runs were released because their worker stopped answering."""
    return Event.objects.filter(conversation_id=conversation_id, type="error", payload__kind=WORKER_LOST).count()


def continue_lost_run(conversation_id: int, *, note: str) -> str:
    """Go on with a run `release` ended because its worker died, from what the conversation stored.

    What was stored is the state: the person's message, each finished turn (the model's answer and
    its calls' results) and the error results `release` gave the calls the dead worker left without
    one — a call that was in flight is not run again behind the model's back; the model is asked
    again and sees that it did not complete. A new run token makes the dead worker harmless should it
    come back. Returns "queued" (a worker goes on under the new token), "finished" (the model's final
    answer was stored before the worker died: the run ends with it, nothing is asked twice) or ""
    (the conversation's last run did not end that way, or it was continued already: nothing done).
    The caller decides whether, and how often, a run is continued (task runs do, docs/agent-eval.md).
    """
    with transaction.atomic():
        locked = lock_conversation(conversation_id)
        last = locked.events.order_by("-sequence").first()
        if (locked.status != Conversation.Status.FAILED or locked.run_token or last is None or last.type != "error"
                or last.payload.get("kind") != WORKER_LOST):
            return ""
        stored = Message.objects.filter(conversation_id=locked.pk, compacted=False).order_by("-position").first()
        if stored is not None and stored.role == "assistant" and not any(
                isinstance(block, dict) and block.get("type") == "tool_use" for block in stored.content):
            record_event(locked, StatusChanged(status=Conversation.Status.IDLE, note=f"{note}: its answer was stored "
                                               "before the worker stopped, so the run ends with it"))
            record_event(locked, TurnFinished(turn=0, stop_reason="end_turn", status=Conversation.Status.IDLE, final=True,
                                              reason="end_turn"), status=Conversation.Status.IDLE)
            return "finished"
        run_token = begin_run(locked)
        record_event(locked, StatusChanged(status=Conversation.Status.RUNNING, note=note), status=Conversation.Status.RUNNING)
        transaction.on_commit(lambda: queue_run(locked.pk, run_token))
    return "queued"


def _answer_unanswered_calls(conversation_id: int, text: str) -> None:
    """If the last message is the model's tool calls with no results yet, store error results for them."""
    last = Message.objects.filter(conversation_id=conversation_id, compacted=False).order_by("-position").first()
    if last is None or last.role != "assistant":
        return
    calls = [block for block in last.content if isinstance(block, dict) and block.get("type") == "tool_use"]
    if calls:
        position = Message.objects.filter(conversation_id=conversation_id).aggregate(m=Max("position"))["m"] + 1
        Message.objects.create(
            conversation_id=conversation_id, position=position, role="user",
            content=[error_tool_result(block["id"], text) for block in calls],
        )
