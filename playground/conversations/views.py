"""Conversation pages: list, new, detail (chat + per-turn inspector), compare; POST fallbacks for the socket."""
from __future__ import annotations

import csv
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, EDITOR, OPERATOR, VIEWER, has_role, role_required
from playground.conversations import budgets, feedback, runs, services, sharing, traces
from playground.conversations.forms import (
    AnswerForm, BudgetForm, CompareForm, ConversationFilterForm, FeedbackForm, MessageForm, NewConversationForm, OverviewFilterForm, ShareForm,
)
from playground.conversations.overview import DEFAULT_PERIOD, DEFAULT_SPLIT, METRICS, SPLITS, overview
from playground.conversations.fragments import SHARED_KEY, render_notice
from playground.conversations.models import Conversation, ShareLink, UsageBudget
from playground.conversations.search_misses import PAGE_ROWS_RANKED, profile_misses
from playground.conversations.selectors import (
    accounting_figures, can_act, cost_difference, can_view, compare_members, conversation_export_data, conversations_for, filter_conversations, list_rows,
    panel_context, presentation_context, provider_label,
)
from playground.registry import labelled_sets
from playground.registry.models import AgentProfile

PAGE_SIZE = 25


def _get_conversation_for_user(request, pk: int) -> Conversation:
    conversation = get_object_or_404(Conversation.objects.select_related("profile", "owner"), pk=pk)
    if not can_view(request.user, conversation):
        raise Http404("No such conversation")
    return conversation


def _get_conversation_to_act_on(request, pk: int) -> Conversation:
    """Send, answer, cancel: the owner's or an admin's; anyone else watching gets the 404 of `owned` routes."""
    conversation = _get_conversation_for_user(request, pk)
    if not can_act(request.user, conversation):
        raise Http404("No such conversation")
    return conversation


def _done(request, conversation: Conversation):
    # htmx posts get an empty answer (the socket brings the events); plain forms go back to the page.
    if request.htmx:
        return HttpResponse(status=204)
    return redirect("conversations:detail", pk=conversation.pk)


@role_required(VIEWER)
@require_safe
def conversation_list(request):
    """Conversations, newest first, searched and filtered by GET parameters (bookmarkable), a page at a time."""
    filters = ConversationFilterForm(request.GET)
    rows = feedback.with_feedback_counts(list_rows(filter_conversations(conversations_for(request.user), filters.valid_filters())))
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    members = compare_members(request.user, [c.compare_group for c in page.object_list if c.compare_group])
    for conversation in page.object_list:
        conversation.provider_label = provider_label(conversation)
        conversation.group_members = members.get(conversation.compare_group, [])
    context = {
        "page": page,
        "filters": filters,
        "filter_query": urlencode({k: v for k, v in request.GET.items() if k != "page" and v}),
        "form": NewConversationForm() if has_role(request.user, OPERATOR) else None,
    }
    template = "conversations/_list_results.html" if request.htmx and request.htmx.target == "conversation-results" else "conversations/list.html"
    return render(request, template, context)


@role_required(OPERATOR)
def conversation_new(request):
    form = NewConversationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            conversation = services.start_conversation(
                request.user, profile=form.cleaned_data["profile"], provider=form.cleaned_data["provider"]
            )
        except services.ConversationError as exc:  # a budget is reached
            form.add_error(None, str(exc))
        else:
            if form.cleaned_data["message"].strip():
                services.send_message(conversation, form.cleaned_data["message"], user=request.user)
            return redirect("conversations:detail", pk=conversation.pk)
    return render(request, "conversations/new.html", {"form": form})


@role_required(VIEWER)
@require_safe
def conversation_detail(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    # A page that says "running" for a run whose worker is gone would be a lie: release it first.
    runs.release_lost_run(conversation)
    panel = panel_context(conversation, request.user)
    shares = []
    if panel["can_act"]:
        shares = [{"link": link, "url": request.build_absolute_uri(reverse("conversations:shared", args=[sharing.token_for(link)]))}
                  for link in sharing.active_links(conversation)]
    return render(request, "conversations/detail.html", {
        "panel": panel, "shares": shares, "share_form": ShareForm() if panel["can_act"] else None,
        "feedback": feedback.feedback_context(conversation, request.user),
        "trace": traces.latest_trace(conversation.pk),
    })


@role_required(OPERATOR)
@require_POST
def feedback_give(request, pk: int):
    """Thumbs up or down and/or a comment on the conversation or one of its turns (feedback.py)."""
    conversation = _get_conversation_for_user(request, pk)
    form = FeedbackForm(request.POST, targets=feedback.turns_of(conversation))
    error = ""
    if form.is_valid():
        try:
            feedback.give_feedback(conversation, request.user, turn_sequence=form.cleaned_data["target"],
                                   rating=form.cleaned_data["rating"], comment=form.cleaned_data["comment"])
        except feedback.FeedbackError as exc:
            error = str(exc)
    else:
        error = " ".join(e for errors in form.errors.values() for e in errors)
    return _feedback_answer(request, conversation, error, "Feedback kept.")


@role_required(OPERATOR)
@require_POST
def feedback_withdraw(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    try:
        target = int(request.POST.get("target", ""))
    except ValueError:
        return _feedback_answer(request, conversation, "Which feedback? The target is missing.", "")
    removed = feedback.withdraw_feedback(conversation, request.user, target)
    return _feedback_answer(request, conversation, "" if removed else "There was no feedback of yours to withdraw.",
                            "Feedback withdrawn.")


def _feedback_answer(request, conversation, error: str, done: str):
    """htmx: the feedback section again, with the error in it; a plain form: back to the page with a message."""
    if request.htmx:
        context = {"feedback": feedback.feedback_context(conversation, request.user), "feedback_error": error}
        return render(request, "conversations/_feedback.html", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, done)
    return redirect(reverse("conversations:detail", args=[conversation.pk]) + "#feedback")


@role_required(VIEWER)
@require_safe
def conversation_present(request, pk: int):
    """Presentation mode: the conversation replayed step by step, large type (the same event templates)."""
    conversation = _get_conversation_for_user(request, pk)
    return render(request, "conversations/present.html", {
        "present": presentation_context(conversation),
        "back_url": reverse("conversations:detail", args=[conversation.pk]),
    })


# -- share links (sharing.py) ------------------------------------------------------------------------
@role_required(OPERATOR)
@require_POST
def share_create(request, pk: int):
    """A read-only link with an expiry, for the owner or an admin."""
    conversation = _get_conversation_to_act_on(request, pk)
    form = ShareForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose how long the link works: " + ", ".join(o.label for o in sharing.expiry_options()) + ".")
    else:
        link = sharing.create_link(conversation, user=request.user, hours=form.cleaned_data["hours"])
        messages.success(request, f"Share link created: it works until {link.expires_at:%Y-%m-%d %H:%M} UTC, for anyone who has it.")
    return redirect(reverse("conversations:detail", args=[pk]) + "#share")


@role_required(OPERATOR)
@require_POST
def share_revoke(request, pk: int, link: int):
    conversation = _get_conversation_to_act_on(request, pk)
    share = get_object_or_404(ShareLink, pk=link, conversation=conversation)
    sharing.revoke_link(share, user=request.user)
    messages.success(request, "Share link revoked: it no longer opens the conversation, and pages open on it were closed.")
    return redirect(reverse("conversations:detail", args=[pk]) + "#share")


def _shared_or_refusal(request, token: str):
    try:
        return sharing.resolve(token), None
    except sharing.ShareLinkRefused as refused:
        return None, _not_kept(render(request, "conversations/share_refused.html", {"refused": refused}, status=refused.status))


def _not_kept(response: HttpResponse) -> HttpResponse:
    """A shared page is stored by no cache (a proxy, the browser's): revoking the link ends it."""
    patch_cache_control(response, no_store=True, private=True)
    return response


def _anonymous(context: dict) -> dict:
    """A panel or presentation context as a share link shows it: no internal id, no forms, no names."""
    return {**context, "conv_key": SHARED_KEY, "shared": True, "can_act": False}


@require_safe
def shared_conversation(request, token: str):
    """A share link: the conversation, live and read-only, for anyone holding the link (no login)."""
    link, refusal = _shared_or_refusal(request, token)
    if refusal is not None:
        return refusal
    panel = _anonymous(panel_context(link.conversation, None))
    panel["share_token"] = token
    return _not_kept(render(request, "conversations/shared.html", {
        "panel": panel, "link": link, "present_url": reverse("conversations:shared_present", args=[token]),
    }))


@require_safe
def shared_present(request, token: str):
    link, refusal = _shared_or_refusal(request, token)
    if refusal is not None:
        return refusal
    return _not_kept(render(request, "conversations/present.html", {
        "present": _anonymous(presentation_context(link.conversation)),
        "back_url": reverse("conversations:shared", args=[token]),
    }))


@role_required(VIEWER)
@require_safe
def conversation_export(request, pk: int):
    """The conversation and its stored events as a JSON download (docs/conversations.md, "Exporting a
    conversation"). Same access as the page; the payloads are the ones the page renders."""
    conversation = _get_conversation_for_user(request, pk)
    # The charset said: without it a browser opening the file reads UTF-8 as Latin-1 ("Â±" for "±").
    response = JsonResponse(conversation_export_data(conversation), json_dumps_params={"indent": 2, "ensure_ascii": False},
                            content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.json"'
    return response


@role_required(OPERATOR)
@require_POST
def conversation_send(request, pk: int):
    conversation = _get_conversation_to_act_on(request, pk)
    form = MessageForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Write a message first (at most {services.MAX_MESSAGE_CHARS:,} characters).")
        return redirect("conversations:detail", pk=pk)
    return _carry_out(request, conversation, lambda: services.send_message(conversation, form.cleaned_data["text"], user=request.user))


@role_required(OPERATOR)
@require_POST
def conversation_answer(request, pk: int):
    conversation = _get_conversation_to_act_on(request, pk)
    form = AnswerForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That answer is not one of approve once, always or deny.")
        return redirect("conversations:detail", pk=pk)
    return _carry_out(
        request, conversation,
        lambda: services.answer_permission(conversation, form.cleaned_data["prompt"], form.cleaned_data["choice"], user=request.user),
    )


def _carry_out(request, conversation, action):
    """Run a service call for a POST; one the conversation's state refuses (ConversationError) is a
    409 with the reason for htmx, a flash message otherwise."""
    try:
        action()
    except services.ConversationError as exc:
        if request.htmx:
            return HttpResponse(str(exc), status=409)
        messages.error(request, str(exc))
    return _done(request, conversation)


@role_required(OPERATOR)
@require_POST
def conversation_cancel(request, pk: int):
    conversation = _get_conversation_to_act_on(request, pk)
    if not services.request_cancel(conversation, user=request.user):
        # Most often the answer arrived just before the click: say the run had already finished.
        text = services.nothing_to_cancel(conversation)
        if request.htmx:
            return HttpResponse(render_notice(conversation.pk, text, kind="info"))
        messages.info(request, text)
    return _done(request, conversation)


@role_required(OPERATOR)
def compare(request):
    """Start the same message under two profiles, side by side."""
    form = CompareForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:  # every side's budgets first: no half-started comparison
            for profile, _, _ in form.sides():
                services.check_budget(request.user, profile)
        except services.ConversationError as exc:
            form.add_error(None, str(exc))
            return render(request, "conversations/compare_form.html", {"form": form})
        group = services.new_compare_group()
        for profile, provider, wire_style in form.sides():
            conversation = services.start_conversation(
                request.user, profile=profile, provider=provider, compare_group=group, wire_style=wire_style,
                title=f"Compare: {form.cleaned_data['message'][:60]}",
            )
            services.send_message(conversation, form.cleaned_data["message"], user=request.user)
        return redirect("conversations:compare_view", group=group)
    return render(request, "conversations/compare_form.html", {"form": form})


@role_required(VIEWER)
@require_safe
def compare_view(request, group: str):
    conversations = [c for c in Conversation.objects.filter(compare_group=group).order_by("pk").select_related("profile", "owner")
                     if can_view(request.user, c)]
    if not conversations:
        raise Http404("No such comparison")
    return render(request, "conversations/compare.html", {
        "group": group,
        "panels": [panel_context(c, request.user) for c in conversations],
    })


@role_required(VIEWER)
@require_safe
def compare_figures(request, group: str):
    """The compare view's figures by one accounting (a fragment the page fetches as its sides run)."""
    conversations = [c for c in Conversation.objects.filter(compare_group=group).order_by("pk").select_related("profile")
                     if can_view(request.user, c)]
    if not conversations:
        raise Http404("No such comparison")
    sides = [accounting_figures(c) for c in conversations]
    return render(request, "conversations/_compare_figures.html", {
        "group": group, "sides": sides, "split": cost_difference(sides[0], sides[-1]) if len(sides) == 2 else None})


@role_required(VIEWER)
@require_safe
def usage_overview(request):
    """Tokens, dollars, model-call latency and errors over time, per profile, provider, model, kind of
    conversation or (admins) user, filtered by any of them (docs/traces.md, "The overview"); budgets.
    Every role sees it: it shows counts, tokens, models and durations, nothing of what was said or sent."""
    filters, (period, split, usage_filters, metric) = _overview_filters(request)
    figures = overview(period, split=split, filters=usage_filters)
    is_admin = has_role(request.user, ADMIN)
    return render(request, "conversations/overview.html", {
        "filters": filters, "figures": figures, "rows": figures.rows(), "metric": metric, "metric_label": METRICS[metric],
        "period_label": dict(filters.fields["period"].choices)[period], "split_label": SPLITS[split],
        "chart": overview_chart(figures, metric), "csv_query": request.GET.urlencode(),
        "chart_query": "".join(f"{urlencode({k: v})}&" for k, v in request.GET.items() if k != "metric" and v),
        "budgets": [status for status in budgets.statuses() if is_admin or status.budget.user_id in (None, request.user.pk)],
        "budget_form": BudgetForm() if is_admin else None,
    })


def _overview_filters(request):
    # The defaults fill what a query leaves out, so the selects show the figures' period, not their first option
    # (a chart link carries only `metric`; the next "Show" then sent the first period shown).
    data = {"period": DEFAULT_PERIOD, "metric": "cost", "split": DEFAULT_SPLIT,
            **{key: value for key, value in request.GET.items() if value}}
    filters = OverviewFilterForm(data, can_see_users=has_role(request.user, ADMIN))
    return filters, filters.choices()


CSV_COLUMNS = ("bucket", "split", "group", "runs", "model_calls", "input_tokens", "output_tokens", "cache_read_tokens",
               "dollars", "unpriced_models", "p50_ms", "p95_ms", "run_errors", "tool_errors")


@role_required(VIEWER)
@require_safe
def usage_overview_csv(request):
    """The overview's per-bucket rows as CSV, with the page's filters (one row per bucket and group)."""
    _, (period, split, usage_filters, _) = _overview_filters(request)
    figures = overview(period, split=split, filters=usage_filters)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{period}-per-{split}.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for row in reversed(figures.rows()):
        cell = row["cell"]
        writer.writerow([row["bucket"].isoformat(), split, row["group"], cell.runs, cell.calls, cell.input_tokens,
                         cell.output_tokens, cell.cache_read_tokens, f"{cell.cost:.8f}", " ".join(sorted(cell.unpriced)),
                         "" if cell.p50_ms is None else f"{cell.p50_ms:.1f}", "" if cell.p95_ms is None else f"{cell.p95_ms:.1f}",
                         cell.run_errors, cell.tool_errors])
    return response


@role_required(ADMIN)
@require_POST
def budget_add(request):
    form = BudgetForm(request.POST)
    if form.is_valid():
        budget = form.save(commit=False)
        budget.created_by = request.user
        budget.save()
        budgets.forget_alerts()
        messages.success(request, "Budget added.")
    else:
        messages.error(request, "Budget not added: " + " ".join(e for errors in form.errors.values() for e in errors))
    return redirect("conversations:overview")


@role_required(ADMIN)
@require_POST
def budget_delete(request, pk: int):
    deleted, _ = UsageBudget.objects.filter(pk=pk).delete()
    budgets.forget_alerts()
    messages.success(request, "Budget removed." if deleted else "That budget was already removed.")
    return redirect("conversations:overview")


CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 720, 220, 36
CHART_COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#a16207", "#db2777")


def overview_chart(figures, metric: str) -> dict:
    """An SVG line per group (profile, provider, …) over the buckets (points with their value in a tooltip), drawn by the template."""
    series = figures.series(metric)
    peak = max((v for s in series for v in s["values"] if v is not None), default=0) or 1
    count = max(len(figures.buckets) - 1, 1)
    lines = []
    for index, entry in enumerate(series):
        points = []
        for position, (bucket, value) in enumerate(zip(figures.buckets, entry["values"])):
            if value is None and metric == "p95_ms":
                continue  # no call, no latency: a gap, not a zero
            x = CHART_PAD + (CHART_WIDTH - 2 * CHART_PAD) * position / count
            y = CHART_HEIGHT - CHART_PAD - (CHART_HEIGHT - 2 * CHART_PAD) * (value or 0) / peak
            points.append({"x": round(x, 1), "y": round(y, 1), "value": value, "bucket": bucket})
        lines.append({"group": entry["group"], "colour": CHART_COLOURS[index % len(CHART_COLOURS)], "points": points,
                      "path": " ".join(f"{p['x']},{p['y']}" for p in points)})
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "pad": CHART_PAD, "peak": peak, "lines": lines,
            "first": figures.buckets[0] if figures.buckets else None, "last": figures.buckets[-1] if figures.buckets else None,
            "axis_y": CHART_HEIGHT - CHART_PAD, "right": CHART_WIDTH - CHART_PAD}


# -- where search fails, from usage (search_misses.py) ----------------------------------------------
@role_required(VIEWER)
@require_safe
def search_misses(request):
    """A profile's failed searches (empty, or the tool called next was not returned) with where its
    backend ranks that tool today, and the profile's labelled set built from them. Every role reads
    it, as every role reads the conversations it comes from; editors add rows to the labelled set."""
    profiles = list(AgentProfile.objects.order_by("name"))
    profile = None
    chosen = request.GET.get("profile", "")
    if chosen:
        profile = next((p for p in profiles if str(p.pk) == chosen), None)
        if profile is None:
            messages.error(request, f"No profile with id {chosen[:20]!r}.")
    elif profiles:
        latest = Conversation.objects.filter(profile__isnull=False).order_by("-id").values_list("profile_id", flat=True).first()
        profile = next((p for p in profiles if p.pk == latest), profiles[0])
    context = {"profiles": profiles, "profile": profile, "can_label": has_role(request.user, EDITOR)}
    if profile is not None:
        context["report"] = profile_misses(profile, rows_ranked=PAGE_ROWS_RANKED)
        context["labelled"] = context["report"].labelled_set
        context["toolset"] = labelled_sets.toolset_name(profile)
    return render(request, "conversations/search_misses.html", context)


@role_required(EDITOR)
@require_POST
def search_misses_label(request):
    """Add one failed search to its profile's labelled set: the query → the tool finally called."""
    profile_id = _whole_number(request.POST.get("profile"))
    profile = AgentProfile.objects.filter(pk=profile_id).first() if profile_id is not None else None
    if profile is None:
        messages.error(request, "Choose a profile: the form named none that exists.")
        return redirect("conversations:search_misses")
    back = f"{reverse('conversations:search_misses')}?{urlencode({'profile': profile.pk})}"
    try:
        row, created = labelled_sets.add_labelled_query(profile, request.POST.get("query", ""), request.POST.get("tool", ""),
                                                        conversation_id=_whole_number(request.POST.get("conversation")),
                                                        user=request.user)
    except labelled_sets.LabelRefused as exc:
        messages.error(request, str(exc))
        return redirect(back)
    split = labelled_sets.split_of_query(row.query)
    messages.success(request, f"Added to the {split} split: “{row.query[:80]}” → {row.tool_name}." if created
                     else f"Already in the labelled set: “{row.query[:80]}” → {row.tool_name}.")
    return redirect(back)


@role_required(VIEWER)
@require_safe
def labelled_set_export(request, profile_id: int):
    """The profile's labelled set as the shared toolsets' queries.jsonl (for `toolsearch eval --queries`)."""
    profile = get_object_or_404(AgentProfile, pk=profile_id)
    response = HttpResponse(labelled_sets.queries_jsonl(profile), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="labelled-queries-profile-{profile.pk}.jsonl"'
    return response


def _whole_number(value) -> int | None:
    """A form's id field as a number; anything else (empty, tampered, too long) is None."""
    text = (value or "").strip()
    return int(text) if text.isdigit() and len(text) < 19 else None
