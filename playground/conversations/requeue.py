"""Conversation runs whose task the broker lost, and permission prompts nobody answered in time.

A run that a worker claimed has a heartbeat (lease.py); one that none claimed has `heartbeat_at`
empty and `queued_at` set: the person's request, the answer to a prompt (a resumption), or the last
re-send — never a later event. The background round (playground/lost_tasks.py) asks the broker about
runs still unclaimed AGENT_QUEUE_GRACE_SECONDS after that; one whose task the broker lost is handed
over again under a new run token (`runs.requeue_unclaimed_run`: a resumption is sent again as a
resumption), at most AGENT_QUEUE_ATTEMPTS times, and then failed with an error the page shows.

A prompt's timeout is the round's sweep `expire_overdue_prompts`: every round it denies the prompts
still open past their deadline (`runs.expire_prompt`, the first answer wins), so a prompt is
denied at most half a grace late. Why not a task with the timeout as countdown: Redis loses it on a
restart, and the worker holding it until it is due (kombu's Redis transport hands ETA tasks out at
once) dies when the broker connection drops under it (Celery/kombu 5.7: "Unrecoverable error:
AttributeError ... 'hostname'" while restoring the unacknowledged message) — every open prompt would
take a worker down with a Redis restart. The sweep needs no broker and holds nothing.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from playground import lost_tasks
from playground.conversations.models import Conversation, Event
from playground.conversations.runs import expire_prompt, pending_answer, release_lost_runs, requeue_unclaimed_run

logger = logging.getLogger(__name__)

RUN_TASKS = frozenset({"conversations.run_conversation", "conversations.resume_conversation"})


def unclaimed_runs(grace: float) -> dict[int, str]:
    """Runs still unclaimed `grace` seconds after they were queued: conversation id → run token."""
    cutoff = timezone.now() - timedelta(seconds=grace)
    rows = (Conversation.objects.filter(status=Conversation.Status.RUNNING, heartbeat_at__isnull=True, queued_at__lt=cutoff)
            .exclude(run_token="").values_list("pk", "run_token"))
    return dict(rows)


def token_of(args: list) -> str:
    """A run task's arguments: (conversation id, run token[, prompt sequence])."""
    return str(args[1]) if len(args) > 1 else ""


def run_token_of(raw: bytes | str) -> str:
    """The run token a queued Celery message carries ("" for other tasks or an unreadable message)."""
    task = lost_tasks.task_of(raw)
    return token_of(task[1]) if task is not None and task[0] in RUN_TASKS else ""


RUNS = lost_tasks.watch(lost_tasks.Kind(
    name="conversation", tasks=RUN_TASKS, key_of=token_of, unclaimed=unclaimed_runs, lost=requeue_unclaimed_run))


# -- permission prompts past their deadline -------------------------------------------------------
def overdue_prompts() -> list[tuple[int, int]]:
    """(conversation id, prompt sequence) of runs paused on a prompt still open past its deadline."""
    paused = dict(Conversation.objects.filter(status=Conversation.Status.WAITING, paused_run__isnull=False)
                  .values_list("pk", "paused_run__prompt_sequence"))
    if not paused:
        return []
    now = timezone.now()
    prompts = Event.objects.filter(conversation_id__in=list(paused), type="permission_prompt",
                                   sequence__in={seq for seq in paused.values() if isinstance(seq, int)})
    overdue = []
    for prompt in prompts:
        if paused.get(prompt.conversation_id) != prompt.sequence:
            continue
        timeout = float(prompt.payload.get("timeout_seconds") or settings.PERMISSION_PROMPT_TIMEOUT_SECONDS)
        if prompt.created_at + timedelta(seconds=timeout) < now and pending_answer(prompt.conversation_id, prompt.sequence) is None:
            overdue.append((prompt.conversation_id, prompt.sequence))
    return overdue


def expire_overdue_prompts() -> int:
    """Deny the overdue prompts; the resumption, should the broker be down right now, is left queued
    for the round to hand over once it is back. How many it denied."""
    expired = 0
    for conversation_id, sequence in overdue_prompts():
        if expire_prompt(conversation_id, sequence):
            expired += 1
            logger.info("conversation %s: prompt #%s unanswered past its deadline: denied", conversation_id, sequence)
    return expired


PROMPTS = lost_tasks.sweep("permission prompts", expire_overdue_prompts)

# Conversations whose worker died (lease.py): released by every round, whoever opens the page or not.
LOST_WORKERS = lost_tasks.sweep("conversations whose worker died", release_lost_runs)
