"""Replay and fork: the "Replay with…" form, and a replay side by side with its origin (replays.py)."""
from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_safe

from playground.access import OPERATOR, VIEWER, role_required
from playground.conversations import replays
from playground.conversations.models import Conversation
from playground.conversations.replay_figures import side_by_side
from playground.conversations.replay_forms import ReplayForm
from playground.conversations.selectors import can_view, panel_context


def _visible(request, pk: int) -> Conversation:
    conversation = get_object_or_404(Conversation.objects.select_related("profile", "owner"), pk=pk)
    if not can_view(request.user, conversation):
        raise Http404("No such conversation")
    return conversation


@role_required(OPERATOR)
def replay(request, pk: int):
    """Who may start a conversation may replay any they can watch; the replay is theirs."""
    origin = _visible(request, pk)
    initial = {"through": request.GET["through"]} if request.GET.get("through", "").isdigit() else None
    form = ReplayForm(request.POST or None, origin=origin, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                new = replays.start_replay(origin, request.user, form.choice())
            except replays.ReplayError as refused:
                form.add_error(None, str(refused))
            else:
                return redirect("conversations:replay_view", pk=new.pk)
        status = 400
    return render(request, "conversations/replay_form.html", {"form": form, "origin": origin,
                                                               "running": origin.status in replays.ACTIVE_STATUSES}, status=status)


@role_required(VIEWER)
@require_safe
def replay_view(request, pk: int):
    """The replay beside its origin: both pages' panels, live, and the per-turn figures."""
    conversation = _visible(request, pk)
    if conversation.replay_plan is None:
        messages.info(request, f"Conversation #{pk} is not a replay: nothing to show side by side.")
        return redirect("conversations:detail", pk=pk)
    origin = conversation.replay_of if conversation.replay_of_id and can_view(request.user, conversation.replay_of) else None
    panels = [panel_context(c, request.user) for c in (origin, conversation) if c is not None]
    return render(request, "conversations/replay.html", {
        "replay": conversation, "origin": origin, "origin_id": (conversation.replay_plan or {}).get("origin"),
        "progress": replays.progress(conversation), "panels": panels,
    })


@role_required(VIEWER)
@require_safe
def replay_figures(request, pk: int):
    """The side-by-side figures (a fragment the page fetches again as the runs' events arrive)."""
    conversation = _visible(request, pk)
    if conversation.replay_plan is None:
        raise Http404("Not a replay")
    origin = conversation.replay_of if conversation.replay_of_id else None
    figures = side_by_side(origin, conversation)
    return render(request, "conversations/_replay_figures.html", {
        **figures, "progress": replays.progress(conversation), "replay": conversation, "origin": origin})
