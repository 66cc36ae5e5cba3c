"""Task runs: N tasks × M profiles, each pair one conversation through the real loop on Celery.

The run is advanced (`advance`) under its row lock — by a conversation's task ending (a Celery
`task_postrun` handler, tasks.py), by the run's own task when it is started or cancelled, and by
the background round on Celery beat (playground/lost_tasks.py), which also carries a run past a worker that
died. Advancing: a conversation paused on a permission prompt gets the run's policy as its answer
(so nothing waits on a person); a conversation that ended gets its measures; pending tasks start while
fewer than `concurrency` run; the run ends when none is left. Each task's conversation is created,
and its message queued, in the same transaction that marks the task running: a task starts once.
A task whose worker died is released by the conversations' lease ("worker_lost") and then goes on in
the same conversation from what it stored (`conversation_runs.continue_lost_run`, under a new run
token), at most AGENT_QUEUE_ATTEMPTS times: never lost, never run twice, one conversation per task.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from playground import lost_tasks
from playground.agenteval import broadcast, sources
from playground.agenteval.models import Task, TaskRun, TaskRunItem, TaskSet
from playground.conversations import budgets
from playground.conversations import runs as conversation_runs
from playground.conversations import services as conversation_services
from playground.conversations.models import Conversation, Event
from playground.conversations.providers import estimating_provider_keys
from playground.engine.agent_measures import measure_task
from playground.queueing import queue_task
from playground.registry.models import AgentProfile
from playground.registry.prices import current_price_table

logger = logging.getLogger(__name__)

SYSTEM_USERNAME = "agenteval"  # owns the conversations of runs nobody logged in started (the command line)
MAX_CONCURRENCY = 16
MAX_ITEMS = 5_000
FINISHED = (Conversation.Status.IDLE, Conversation.Status.FAILED, Conversation.Status.CANCELLED)
POLICY_ANSWERS = {TaskRun.Policy.ALLOW: "once", TaskRun.Policy.DENY: "deny"}


class TaskRunError(ValueError):
    """A run that cannot start as asked; the message says why."""


def select_tasks(task_set: TaskSet, split: str = "all", limit: int | None = None) -> list[Task]:
    """The set's tasks of a split, evenly sampled down to `limit` (as the search evaluation samples)."""
    if split not in ("all", "dev", "test"):
        raise TaskRunError(f"Unknown split {split!r}: dev, test or all.")
    tasks = list(task_set.tasks.all() if split == "all" else task_set.tasks.filter(split=split))
    if limit is not None and 0 < limit < len(tasks):
        step = len(tasks) / limit
        tasks = [tasks[int(i * step)] for i in range(limit)]
    return tasks


def system_user():
    user, created = get_user_model().objects.get_or_create(username=SYSTEM_USERNAME, defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def start_run(task_set: TaskSet, profiles: Sequence[AgentProfile], *, split: str = "all", limit: int | None = None,
              policy: str = TaskRun.Policy.ALLOW, concurrency: int = 2, user=None) -> TaskRun:
    """Check the tasks can be scored on this registry, create one item per task and profile, and queue
    the run's task once the rows are committed."""
    if not profiles:
        raise TaskRunError("Choose at least one agent profile.")
    if len({p.pk for p in profiles}) != len(profiles):
        raise TaskRunError("A profile is chosen twice.")
    if policy not in POLICY_ANSWERS:
        raise TaskRunError("The permission policy is allow or deny.")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise TaskRunError(f"Concurrency is between 1 and {MAX_CONCURRENCY}.")
    tasks = select_tasks(task_set, split, limit)
    if not tasks:
        raise TaskRunError(f"The task set {task_set.name!r} has no tasks in the {split} split.")
    if len(tasks) * len(profiles) > MAX_ITEMS:
        raise TaskRunError(f"{len(tasks)} tasks × {len(profiles)} profiles is over {MAX_ITEMS} conversations: use a limit.")
    for profile in profiles:
        over_budget = budgets.refusal(user if getattr(user, "is_authenticated", False) else None, profile)
        if over_budget:
            raise TaskRunError(over_budget)
    missing = sources.missing_tools(task_set, tasks)
    if missing:
        offer = (f" Import the {task_set.catalog} catalog as catalog-only tools (their calls are simulated, and labelled so) "
                 "and start again." if sources.importable_catalog(task_set) else "")
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise TaskRunError(f"This registry lacks {len(missing)} gold tool(s) of these tasks ({shown}): scoring them here "
                           f"would measure the wrong catalog.{offer}")
    with transaction.atomic():
        run = TaskRun.objects.create(
            task_set=task_set, split=split, task_limit=limit, permission_policy=policy, concurrency=concurrency,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            profiles=[{"id": p.pk, "name": p.name, "provider": p.provider} for p in profiles],
        )
        TaskRunItem.objects.bulk_create([
            TaskRunItem(run=run, task=task, profile=profile, profile_name=profile.name, position=i * len(profiles) + j)
            for i, task in enumerate(tasks) for j, profile in enumerate(profiles)
        ], batch_size=500)
        transaction.on_commit(lambda: queue_advance(run.pk))
    return run


def queue_advance(run_id: int) -> None:
    try:
        queue_task("agenteval.advance_run", run_id)
    except Exception:  # the broker is down: the background round (beat) advances the run once it is back
        logger.exception("could not queue task run %s; the background round will advance it", run_id)


def cancel_run(run: TaskRun) -> bool:
    """Stop a run: running conversations are asked to cancel here and now (their workers' leases
    interrupt the call in flight), and the run's next step cancels the tasks not started. Asked here,
    not in that step: the step is a Celery task, and while every worker process runs one of the run's
    conversations (a slow tool call) it would wait for one of them to end."""
    with transaction.atomic():
        changed = TaskRun.objects.filter(pk=run.pk, status__in=[TaskRun.Status.QUEUED, TaskRun.Status.RUNNING]).update(
            status=TaskRun.Status.CANCELLING)
        if not changed:
            return False
        running = TaskRunItem.objects.filter(run_id=run.pk, status=TaskRunItem.Status.RUNNING,
                                             conversation__isnull=False).select_related("conversation")
        for item in running:
            conversation_services.request_cancel(item.conversation)
        transaction.on_commit(lambda: queue_advance(run.pk))
    return True


# -- advancing -------------------------------------------------------------------------------------------
def advance(run_id: int, *, measure: bool = True) -> TaskRun | None:
    """One step of the run under its row lock (see the module's docstring); broadcasts its progress.

    `measure=False` is the quick step on a worker right after one of the run's conversations ended:
    the ended tasks free their places and the next conversations are queued, but their measures
    (reading each ended conversation's events) are left for a full step, which also ends the run.
    So the worker, whose next task is likely one of those conversations, is not held by the reading
    (profiled: starting the next conversation and measuring the last one on that path were the run's
    overhead over plain conversations)."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or not run.is_active:
            return run
        if run.status == TaskRun.Status.QUEUED:
            run.status, run.started_at = TaskRun.Status.RUNNING, timezone.now()
            run.save(update_fields=["status", "started_at"])
        running = list(run.items.filter(status=TaskRunItem.Status.RUNNING).select_related("conversation", "task"))
        still_running = unmeasured = 0
        for item in running:
            ended = _settle(run, item, measure=measure)
            if not ended:
                still_running += 1
            elif item.status == TaskRunItem.Status.RUNNING:
                unmeasured += 1  # ended, its measures left for a full step
        if run.status == TaskRun.Status.CANCELLING:
            run.items.filter(status=TaskRunItem.Status.PENDING).update(status=TaskRunItem.Status.CANCELLED,
                                                                       finished_at=timezone.now())
        else:
            free = max(0, run.concurrency - still_running)
            for item in list(run.items.filter(status=TaskRunItem.Status.PENDING).select_related("task", "profile")[:free]):
                _start(run, item)
                still_running += 1
        if still_running == unmeasured == 0 and not run.items.filter(status=TaskRunItem.Status.PENDING).exists():
            run.status = TaskRun.Status.CANCELLED if run.status == TaskRun.Status.CANCELLING else TaskRun.Status.DONE
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "finished_at"])
        transaction.on_commit(lambda: broadcast.send_progress_soon(run_id))
    return run


def _settle(run: TaskRun, item: TaskRunItem, *, measure: bool = True) -> bool:
    """Look at a running task's conversation: answer its prompt, cancel it, or record its end (with
    `measure=False`, leave the ended task running for a step that measures it). True when the task's
    conversation has ended."""
    conversation = item.conversation
    if conversation is None:  # deleted under the run: nothing to measure
        item.status, item.finished_at = TaskRunItem.Status.CANCELLED, timezone.now()
        item.measures = {"errors": {"conversation_deleted": 1}}
        item.save(update_fields=["status", "finished_at", "measures"])
        return True
    # Read a moment ago with the running items, in this transaction: no second read.
    conversation_runs.release_lost_run(conversation)  # its worker died: the lease machinery ends the run
    if conversation.status == Conversation.Status.FAILED and run.status != TaskRun.Status.CANCELLING:
        if _continue_after_lost_worker(run, conversation) == "queued":
            return False
        conversation.refresh_from_db()
    if conversation.status in FINISHED:
        if not measure:
            return True
        item.measures = measure_item(item)
        # A conversation someone cancelled (the run's cancel, or a person on its page) did not complete;
        # nor did one whose worker died while the run was being cancelled (it is not continued then).
        cancelled = conversation.status == Conversation.Status.CANCELLED or (
            run.status == TaskRun.Status.CANCELLING and conversation_runs.WORKER_LOST in item.measures["errors"])
        item.status = TaskRunItem.Status.CANCELLED if cancelled else TaskRunItem.Status.DONE
        item.finished_at = timezone.now()
        item.save(update_fields=["status", "finished_at", "measures"])
        return True
    if run.status == TaskRun.Status.CANCELLING:
        if conversation.status != Conversation.Status.CANCELLING:
            conversation_services.request_cancel(conversation)
        conversation.refresh_from_db()
        if conversation.status in FINISHED:
            item.measures = measure_item(item)
            item.status, item.finished_at = TaskRunItem.Status.CANCELLED, timezone.now()
            item.save(update_fields=["status", "finished_at", "measures"])
            return True
        return False
    if conversation.status == Conversation.Status.WAITING and conversation.paused_run:
        prompt_sequence = conversation.paused_run.get("prompt_sequence")
        if prompt_sequence and conversation_runs.pending_answer(conversation.pk, prompt_sequence) is None:
            try:
                conversation_services.answer_permission(
                    conversation, prompt_sequence, POLICY_ANSWERS[run.permission_policy],
                    note=f"answered by task run {run.pk}'s policy ({run.permission_policy})")
            except conversation_runs.ConversationError:
                pass  # answered meanwhile (the prompt's deadline): theirs stands
    return False


def _continue_after_lost_worker(run: TaskRun, conversation: Conversation) -> str:
    """A task whose worker died goes on from its conversation's saved state, in the same conversation
    (so the task has one conversation and one result), at most AGENT_QUEUE_ATTEMPTS times; after that,
    or when its run ended otherwise, nothing is done and the task ends with the error it got."""
    losses = conversation_runs.worker_losses(conversation.pk)
    if not losses or lost_tasks.attempts_used(losses - 1):
        return ""
    return conversation_runs.continue_lost_run(
        conversation.pk, note=f"its worker stopped answering: task run {run.pk} goes on from the saved conversation "
                              f"({losses} of {settings.AGENT_QUEUE_ATTEMPTS})")


def _start(run: TaskRun, item: TaskRunItem) -> None:
    owner = run.created_by or system_user()
    conversation = conversation_services.start_conversation(
        owner, profile=item.profile, title=f"Task run {run.pk} · {item.task.query}"[:200], kind=Conversation.Kind.TASK_RUN)
    item.conversation, item.status, item.started_at = conversation, TaskRunItem.Status.RUNNING, timezone.now()
    item.save(update_fields=["conversation", "status", "started_at"])
    # The message's run is queued after this transaction commits (send_message's on_commit).
    conversation_services.send_message(conversation, item.task.query, user=owner)


MEASURED_EVENTS = ("turn_started", "toolsearch_query", "tool_call", "tool_result", "model_response", "cache_strip", "error",
                   "cancelled", "status", "turn_finished")


def measure_item(item: TaskRunItem) -> dict:
    conversation_events = Event.objects.filter(conversation_id=item.conversation_id)
    span = conversation_events.aggregate(first=Min("created_at"), last=Max("created_at"))
    wall = (span["last"] - span["first"]).total_seconds() if span["first"] is not None else 0.0
    # Only the kinds the measures read: a model_request event carries the whole request body (every
    # tool's definition with tool search off), which the measures never need.
    events = list(conversation_events.filter(type__in=MEASURED_EVENTS).order_by("sequence").values_list("type", "payload"))
    measures = measure_task(events, item.task.expected_tools,
                            item.task.equivalent_names, prices=current_price_table(), wall_s=wall,
                            estimating_providers=estimating_provider_keys())
    return measures.to_dict()


def advance_active_runs() -> int:
    """Every active run one step (the background round on beat); how many were advanced."""
    advanced = 0
    for run_id in TaskRun.objects.filter(status__in=[TaskRun.Status.QUEUED, TaskRun.Status.RUNNING,
                                                     TaskRun.Status.CANCELLING]).values_list("pk", flat=True):
        try:
            advance(run_id)
            advanced += 1
        except Exception:  # one broken run must not stop the others' progress
            logger.exception("could not advance task run %s", run_id)
    return advanced


def advance_run_of_conversation(conversation_id: int, *, measure: bool = True) -> int | None:
    """A conversation's task ended: advance the run it belongs to, if any (one indexed read otherwise).
    Returns the run's id."""
    run_id = TaskRunItem.objects.filter(conversation_id=conversation_id).values_list("run_id", flat=True).first()
    if run_id is not None:
        advance(run_id, measure=measure)
    return run_id
