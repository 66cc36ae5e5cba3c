"""The evaluation page: start a run (editors), watch its progress (htmx polling), see recall@k per backend."""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from playground.access import EDITOR, VIEWER, has_role, role_for_writes, role_required
from playground.engine.search import quality
from playground.evaluation import learning, selectors, services
from playground.evaluation.forms import EvaluationForm
from playground.evaluation.models import EvaluationRun
from playground.registry import labelled_sets
from playground.registry.models import AgentProfile, LearnedRanking


def _run_context(run: EvaluationRun) -> dict:
    return {"run": run, "chart": selectors.recall_chart(run), "rows": selectors.result_rows(run),
            "comparison": selectors.default_comparison(run)}


@role_for_writes(EDITOR, message="only editors can start evaluation runs")
@require_http_methods(["GET", "POST"])
def index(request):
    if request.method == "POST":
        form = EvaluationForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            run = services.start_run(
                toolset=data["toolset"], backends=data["all_backends"], query_style=data["query_style"],
                split=data["split"], query_limit=data["query_limit"], user=request.user, usage_from=data["usage_from"],
            )
            # No "queued" flash: it stayed on the page after the run had finished. The run's own status
            # badge (polled while it is active) says queued / running / done.
            return redirect("evaluation:detail", pk=run.pk)
    else:  # ?toolset= preselects one (the search-misses page links a profile's labelled set here)
        form = EvaluationForm(initial={"toolset": request.GET["toolset"]} if request.GET.get("toolset") else None)
    runs = list(selectors.recent_runs())
    latest = next((r for r in runs if r.status == EvaluationRun.Status.DONE), None)
    context = {
        "form": form,
        "runs": runs,
        "latest": _run_context(latest) if latest else None,
        "can_run": has_role(request.user, EDITOR),
        "dev_buckets": quality.DEV_BUCKETS,
        "source": selectors.toolset_source(),
    }
    return render(request, "evaluation/index.html", context)


@role_required(VIEWER)
@require_safe
def detail(request, pk: int):
    run = get_object_or_404(EvaluationRun, pk=pk)
    return render(request, "evaluation/detail.html", _run_context(run))


@role_required(VIEWER)
@require_safe
def progress(request, pk: int):
    """The run's status fragment; it keeps polling itself (hx-trigger) while the run is active."""
    run = get_object_or_404(EvaluationRun, pk=pk)
    return render(request, "evaluation/_run.html", _run_context(run))


@role_for_writes(EDITOR, message="only editors can train or switch learned rankings")
@require_http_methods(["GET", "POST"])
def learned(request):
    """Per profile with a labelled set: its learned-ranking versions, before/after, train / switch on / off."""
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "train":
            profile = get_object_or_404(AgentProfile, pk=_number(request.POST.get("profile")))
            row = learning.start_training(profile, request.user)
            messages.success(request, f"Training version {row.version} of {profile.name}'s learned ranking: this page shows it when it is done.")
        elif action in ("on", "off"):
            row = get_object_or_404(LearnedRanking, pk=_number(request.POST.get("ranking")))
            if action == "off":
                learning.switch_off(row)
                messages.success(request, f"Version {row.version} is off: {row.profile.name} searches with its backend alone.")
            else:
                try:
                    learning.switch_on(row)
                    messages.success(request, f"Version {row.version} is on: {row.profile.name}'s searches use it.")
                except learning.SwitchRefused as exc:
                    messages.error(request, str(exc))
        else:
            messages.error(request, "Unknown action.")
        return redirect("evaluation:learned")
    context = {"profiles": selectors.learned_rankings_by_profile(labelled_sets.profiles_with_sets()),
               "can_run": has_role(request.user, EDITOR)}
    return render(request, "evaluation/learned.html", context)


def _number(value) -> int:
    """A posted id; anything else finds no row (a 404, not a 500)."""
    return int(value) if str(value or "").isdigit() else 0
