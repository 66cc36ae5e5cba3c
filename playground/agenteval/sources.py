"""Where task sets come from, and whether the registry holds the catalog they were labelled on.

Sources: a toolset's labelled queries (looked up as the evaluation page looks them up), an uploaded
JSONL of the same format, and "save as task" from a finished conversation. A task set remembers its
catalog; a run refuses to score it against a registry that lacks its gold tools, and offers to import
that catalog as catalog-only tools (their calls are simulated, and labelled so on every result).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from django.db import transaction
from django.db.models import Max

from playground.agenteval.models import Task, TaskSet
from playground.conversations.models import Conversation, Event
from playground.engine.catalog_io import CatalogFormatError, LabelledQuery, load_queries, toolset_folder
from playground.engine.search.quality import split_of
from playground.engine.tools import TOOL_SEARCH_NAME
from playground.evaluation.selectors import available_toolsets
from playground.registry import services as registry_services
from playground.registry.models import Tool

MAX_UPLOAD_BYTES = 5_000_000
MAX_TASKS = 20_000


class TaskSourceError(ValueError):
    """A source that cannot become tasks; the message says why."""


def _store(task_set: TaskSet, queries: list[LabelledQuery]) -> int:
    if len(queries) > MAX_TASKS:
        raise TaskSourceError(f"{len(queries)} tasks: at most {MAX_TASKS} per set.")
    known = set(task_set.tasks.values_list("external_id", flat=True))
    start = (task_set.tasks.aggregate(m=Max("position"))["m"] or 0) + 1
    rows = [
        Task(task_set=task_set, external_id=q.id[:100], query=q.query, expected_tools=list(q.expected_tool_names),
             equivalent_names={k: list(v) for k, v in q.equivalent_names.items()}, category=(q.category or "")[:100],
             split=split_of(q.id), position=start + i)
        for i, q in enumerate(q for q in queries if q.id[:100] not in known)
    ]
    Task.objects.bulk_create(rows, batch_size=500)
    return len(rows)


@transaction.atomic
def task_set_from_toolset(name: str, *, user=None) -> TaskSet:
    """The labelled queries of a toolset (TOOLSETS_DIR, as the evaluation page lists them)."""
    if name not in available_toolsets():
        raise TaskSourceError(f"No toolset named {name!r} with labelled queries (known: {', '.join(available_toolsets()) or 'none'}; "
                              "set TOOLSETS_DIR to add more).")
    task_set, created = TaskSet.objects.get_or_create(
        name=name, defaults={"source": TaskSet.Source.TOOLSET, "catalog": name, "created_by": _user(user),
                             "description": f"The labelled queries of the {name} toolset."})
    if created or not task_set.tasks.exists():
        try:
            _store(task_set, load_queries(toolset_folder(name) / "queries.jsonl"))
        except (OSError, CatalogFormatError) as exc:
            raise TaskSourceError(f"Could not read the queries of {name}: {exc}") from None
    return task_set


@transaction.atomic
def task_set_from_upload(name: str, payload: bytes | str, *, catalog: str = "", user=None) -> TaskSet:
    """An uploaded queries.jsonl (id, query, expected_tool_names, optional equivalent_names, category)."""
    name = (name or "").strip()
    if not name:
        raise TaskSourceError("Give the task set a name.")
    if TaskSet.objects.filter(name=name).exists():
        raise TaskSourceError(f"A task set named {name!r} exists already.")
    if catalog and catalog not in available_toolsets() and not (toolset_folder(catalog) / "catalog.jsonl").is_file():
        raise TaskSourceError(f"No toolset catalog named {catalog!r}: leave it empty when the tasks are for this registry.")
    data = payload.encode("utf-8") if isinstance(payload, str) else payload
    if len(data) > MAX_UPLOAD_BYTES:
        raise TaskSourceError(f"The file is too large ({len(data):,} bytes; at most {MAX_UPLOAD_BYTES:,}).")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "queries.jsonl"
        path.write_bytes(data)
        try:
            queries = load_queries(path)
        except CatalogFormatError as exc:
            raise TaskSourceError(f"Not a labelled query file: {exc}") from None
        except UnicodeDecodeError:
            raise TaskSourceError("Not a labelled query file: it is not UTF-8 text.") from None
    task_set = TaskSet.objects.create(name=name[:100], source=TaskSet.Source.UPLOAD, catalog=catalog, created_by=_user(user),
                                      description=f"Uploaded: {len(queries)} tasks.")
    _store(task_set, queries)
    return task_set


def tools_that_answered(conversation: Conversation, *, before_sequence: int | None = None) -> list[str]:
    """The tools the conversation called that returned without an error, in order (ToolSearch aside);
    with `before_sequence`, only those that answered before that event (one message's run)."""
    calls = Event.objects.filter(conversation=conversation, type="tool_call")
    results = Event.objects.filter(conversation=conversation, type="tool_result")
    if before_sequence is not None:
        calls, results = calls.filter(sequence__lt=before_sequence), results.filter(sequence__lt=before_sequence)
    names = {e.payload.get("tool_use_id"): e.payload.get("name") for e in calls}
    answered: list[str] = []
    for event in results.order_by("sequence"):
        name = names.get(event.payload.get("tool_use_id")) or event.payload.get("name")
        if name and name != TOOL_SEARCH_NAME and not event.payload.get("is_error") and name not in answered:
            answered.append(name)
    return answered


@transaction.atomic
def save_conversation_as_task(conversation: Conversation, *, task_set_name: str = "Saved conversations", user=None) -> Task:
    """The person's first message as the request; as gold, the tools that answered it without an
    error — in the run of that message only, not the follow-ups' (their tools answer other requests)."""
    if conversation.status not in (Conversation.Status.IDLE, Conversation.Status.FAILED, Conversation.Status.CANCELLED):
        raise TaskSourceError("The conversation is still running: save it as a task once it has finished.")
    first = Event.objects.filter(conversation=conversation, type="message", payload__role="user").order_by("sequence").first()
    if first is None:
        raise TaskSourceError("The conversation has no message to use as the task's request.")
    follow_up = Event.objects.filter(conversation=conversation, type="message", payload__role="user",
                                     sequence__gt=first.sequence).order_by("sequence").values_list("sequence", flat=True).first()
    gold = tools_that_answered(conversation, before_sequence=follow_up)
    if not gold:
        raise TaskSourceError("No tool answered the first message without an error: there is no gold tool to save.")
    task_set, _ = TaskSet.objects.get_or_create(
        name=(task_set_name or "Saved conversations").strip()[:100],
        defaults={"source": TaskSet.Source.CONVERSATIONS, "created_by": _user(user),
                  "description": "Tasks saved from finished conversations (gold: the tools that answered)."})
    external_id = f"conversation-{conversation.pk}"
    task = task_set.tasks.filter(external_id=external_id).first()
    if task is not None:
        return task
    position = (task_set.tasks.aggregate(m=Max("position"))["m"] or 0) + 1
    return Task.objects.create(task_set=task_set, external_id=external_id, query=first.payload.get("text", ""),
                               expected_tools=gold, split=split_of(external_id), position=position,
                               source_conversation=conversation)


MAX_SAVED_AT_ONCE = 200


def save_conversations_as_tasks(conversations, *, task_set_name: str = "Saved conversations",
                                user=None) -> tuple[list[Task], list[tuple[Conversation, str]]]:
    """Many conversations at once (the list's "save selected as tasks"): each as `save_conversation_as_task`
    does, into one task set; the ones that cannot be saved are returned with the reason, nothing half-saved."""
    conversations = list(conversations)
    if not conversations:
        raise TaskSourceError("Select at least one conversation to save.")
    if len(conversations) > MAX_SAVED_AT_ONCE:
        raise TaskSourceError(f"{len(conversations)} conversations selected; at most {MAX_SAVED_AT_ONCE} at once.")
    saved, skipped = [], []
    for conversation in conversations:
        try:
            with transaction.atomic():
                saved.append(save_conversation_as_task(conversation, task_set_name=task_set_name, user=user))
        except TaskSourceError as exc:
            skipped.append((conversation, str(exc)))
    return saved, skipped


def missing_tools(task_set: TaskSet, tasks=None) -> list[str]:
    """Gold tools of the tasks that the registry lacks (a task counts as present when one of each of
    its gold tools' accepted names is registered and enabled)."""
    tasks = list(tasks if tasks is not None else task_set.tasks.all())
    wanted: set[str] = set()
    for task in tasks:
        for gold in task.expected_tools:
            wanted.update([gold, *task.equivalent_names.get(gold, [])])
    present = set(Tool.objects.filter(name__in=wanted, enabled=True).values_list("name", flat=True))
    missing = []
    for task in tasks:
        for gold in task.expected_tools:
            if not ({gold, *task.equivalent_names.get(gold, [])} & present) and gold not in missing:
                missing.append(gold)
    return missing


def importable_catalog(task_set: TaskSet) -> Path | None:
    path = toolset_folder(task_set.catalog) / "catalog.jsonl" if task_set.catalog else None
    return path if path is not None and path.is_file() else None


def import_catalog(task_set: TaskSet, *, user=None) -> dict[str, int]:
    """Import the task set's catalog as catalog-only tools (no server: the executor simulates their
    calls and marks each result as simulated), through the registry's own import."""
    path = importable_catalog(task_set)
    if path is None:
        raise TaskSourceError(f"The task set {task_set.name!r} names no catalog that can be imported.")
    staged, preview = registry_services.stage_import(path.read_text(encoding="utf-8"), filename=path.name, user=_user(user))
    if not preview.ok:
        raise TaskSourceError(f"The catalog {task_set.catalog} has invalid items: nothing was imported.")
    return registry_services.commit_import(staged)


def _user(user):
    return user if getattr(user, "is_authenticated", False) else None
