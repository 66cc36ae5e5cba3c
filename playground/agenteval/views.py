"""Task runs' pages: start a run (editors), watch it live, read the figures per profile, export them."""
from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from playground.access import ADMIN, EDITOR, OPERATOR, VIEWER, has_role, role_for_writes, role_required
from playground.agenteval import selectors, services, sources
from playground.agenteval.forms import TaskRunForm, ToolsetTaskSetForm, UploadTaskSetForm
from playground.agenteval.models import TaskRun, TaskSet
from playground.conversations.models import Conversation
from playground.conversations.providers import provider_is_offline
from playground.conversations.selectors import can_act
from playground.registry.prices import current_price_table

DEMO_NOTE = ("These tasks ran with the offline demo agent, which is not a model: a heuristic stand-in whose success measures ToolSearch "
             "plus argument filling, not a model's judgement. Its tokens are the engine's estimate. Set ANTHROPIC_API_KEY "
             "(or give the profiles the anthropic provider) to measure Claude itself.")


def _price_table_note() -> str:
    table = current_price_table()
    dates = sorted({p.as_of for p in table.prices.values()})
    return f"Dollars from the price table (prices as of {', '.join(dates)}; PRICE_TABLE overrides them)."


@role_for_writes(EDITOR, message="only editors can start task runs")
@require_http_methods(["GET", "POST"])
def index(request):
    form = TaskRunForm(request.POST or None)
    missing: list[str] = []
    offer: TaskSet | None = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = services.start_run(data["task_set"], list(data["profiles"]), split=data["split"], limit=data["limit"],
                                     policy=data["permission_policy"], concurrency=data["concurrency"], user=request.user)
        except services.TaskRunError as exc:
            form.add_error(None, str(exc))
            missing = sources.missing_tools(data["task_set"], services.select_tasks(data["task_set"], data["split"], data["limit"]))
            offer = data["task_set"] if missing and sources.importable_catalog(data["task_set"]) else None
        else:
            return redirect("agenteval:run_detail", pk=run.pk)
    context = {
        "form": form, "missing": missing, "offer": offer,
        "toolset_form": ToolsetTaskSetForm(), "upload_form": UploadTaskSetForm(),
        "task_sets": TaskSet.objects.order_by("name"), "runs": TaskRun.objects.select_related("task_set", "created_by")[:30],
        "can_run": has_role(request.user, EDITOR),
    }
    return render(request, "agenteval/index.html", context, status=400 if form.errors else 200)


@role_required(EDITOR)
@require_POST
def taskset_add(request):
    """A task set from a toolset's labelled queries, or from an uploaded JSONL."""
    try:
        if request.POST.get("source") == "upload":
            form = UploadTaskSetForm(request.POST, request.FILES)
            if not form.is_valid():
                raise sources.TaskSourceError("; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
            task_set = sources.task_set_from_upload(form.cleaned_data["name"], form.cleaned_data["file"].read(),
                                                    catalog=form.cleaned_data["catalog"], user=request.user)
        else:
            form = ToolsetTaskSetForm(request.POST)
            if not form.is_valid():
                raise sources.TaskSourceError("Choose a toolset with labelled queries.")
            task_set = sources.task_set_from_toolset(form.cleaned_data["toolset"], user=request.user)
    except sources.TaskSourceError as exc:
        messages.error(request, str(exc))
        return redirect("agenteval:index")
    messages.success(request, f"Task set {task_set.name}: {task_set.tasks.count()} tasks.")
    return redirect("agenteval:taskset_detail", pk=task_set.pk)


@role_required(VIEWER)
@require_safe
def taskset_detail(request, pk: int):
    task_set = get_object_or_404(TaskSet, pk=pk)
    if request.GET.get("format") == "jsonl":
        lines = [json.dumps({"id": t.external_id, "query": t.query, "expected_tool_names": t.expected_tools,
                             "equivalent_names": t.equivalent_names, "category": t.category}) for t in task_set.tasks.all()]
        response = HttpResponse("\n".join(lines) + "\n", content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="tasks-{task_set.pk}.jsonl"'
        return response
    tasks = list(task_set.tasks.all()[:500])
    context = {"task_set": task_set, "tasks": tasks, "total": task_set.tasks.count(), "missing": sources.missing_tools(task_set),
               "can_import": has_role(request.user, EDITOR) and sources.importable_catalog(task_set) is not None}
    return render(request, "agenteval/taskset.html", context)


@role_required(EDITOR)
@require_POST
def taskset_import_catalog(request, pk: int):
    task_set = get_object_or_404(TaskSet, pk=pk)
    try:
        summary = sources.import_catalog(task_set, user=request.user)
    except sources.TaskSourceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Imported the {task_set.catalog} catalog as catalog-only tools (calls simulated): "
                                  f"{summary.get('new', 0)} new, {summary.get('changed', 0)} changed.")
    return redirect("agenteval:taskset_detail", pk=task_set.pk)


@role_required(OPERATOR)
@require_POST
def save_conversation(request, pk: int):
    conversation = get_object_or_404(Conversation, pk=pk)
    if not can_act(request.user, conversation):  # everyone watches; only its owner (or an admin) saves it
        raise Http404
    try:
        task = sources.save_conversation_as_task(conversation, user=request.user)
    except sources.TaskSourceError as exc:
        messages.error(request, str(exc))
        return redirect("conversations:detail", pk=pk)
    messages.success(request, f"Saved as a task of {task.task_set.name} (gold: {', '.join(task.expected_tools)}).")
    return redirect("agenteval:taskset_detail", pk=task.task_set_id)


@role_required(OPERATOR)
@require_POST
def save_conversations(request):
    """The conversation list's "save selected as tasks": the ones the person may act on, into one task set."""
    ids = [int(value) for value in request.POST.getlist("conversation") if value.isdigit()][:sources.MAX_SAVED_AT_ONCE + 1]
    chosen = list(Conversation.objects.filter(pk__in=ids).order_by("pk"))
    yours = [c for c in chosen if can_act(request.user, c)]
    name = (request.POST.get("task_set") or "").strip() or "Saved conversations"
    not_yours = len(chosen) - len(yours)
    if chosen and not yours:
        messages.error(request, f"{not_yours} not saved ({not_yours} not yours to save): the owner or an admin saves a conversation.")
        return redirect("conversations:list")
    try:
        saved, skipped = sources.save_conversations_as_tasks(yours, task_set_name=name, user=request.user)
    except sources.TaskSourceError as exc:
        messages.error(request, str(exc))
        return redirect("conversations:list")
    if skipped or not_yours:
        reasons = "; ".join(f"#{c.pk}: {reason}" for c, reason in skipped[:10])
        messages.warning(request, f"{len(skipped) + not_yours} not saved" + (f" ({not_yours} not yours to save)" if not_yours else "")
                         + (f": {reasons}" if reasons else "."))
    if not saved:
        return redirect("conversations:list")
    messages.success(request, f"Saved {len(saved)} task{'s' if len(saved) != 1 else ''} to {saved[0].task_set.name}.")
    return redirect("agenteval:taskset_detail", pk=saved[0].task_set_id)


def _run_context(run: TaskRun, *, only: str = "") -> dict:
    items = selectors.items_of(run)
    panel = selectors.panel_context(run, items)
    # The demo note for any offline provider (the demo agent on either vendor's wire), read from its class.
    offline = any(provider_is_offline(row["provider"]) for row in panel["report"]["profiles"])
    return {
        **panel, "items": items, "grid": selectors.grid(run, items, only=only), "only": only,
        "profile_names": [p["name"] for p in run.profiles],
        "demo_note": DEMO_NOTE if offline else "", "price_note": _price_table_note(),
    }


@role_required(VIEWER)
@require_safe
def run_detail(request, pk: int):
    run = get_object_or_404(TaskRun.objects.select_related("task_set"), pk=pk)
    only = request.GET.get("only", "")
    only = only if only in ("failed", "disagree") else ""
    context = _run_context(run, only=only)
    context["can_cancel"] = run.is_active and _may_cancel(request.user, run)
    return render(request, "agenteval/run.html", context)


def _may_cancel(user, run: TaskRun) -> bool:
    """The editor who started the run, or an admin."""
    return has_role(user, ADMIN) or (has_role(user, EDITOR) and run.created_by_id == user.pk)


@role_required(EDITOR)
@require_POST
def run_cancel(request, pk: int):
    run = get_object_or_404(TaskRun, pk=pk)
    if not _may_cancel(request.user, run):
        raise Http404("No task run of yours with this id.")
    if not services.cancel_run(run):
        messages.info(request, "The run had already ended: nothing was cancelled.")
    return redirect("agenteval:run_detail", pk=pk)


@role_required(VIEWER)
@require_safe
def run_export(request, pk: int):
    run = get_object_or_404(TaskRun.objects.select_related("task_set"), pk=pk)
    items = selectors.items_of(run)
    if request.GET.get("format") == "csv":
        response = HttpResponse(selectors.csv_text(items), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="task-run-{run.pk}.csv"'
        return response
    body = {**selectors.report(run, items), "run": run.pk, "task_set": run.task_set.name, "status": run.status,
            "permission_policy": run.permission_policy, "items": selectors.task_json(items)}
    response = HttpResponse(json.dumps(body, indent=2), content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="task-run-{run.pk}.json"'
    return response
