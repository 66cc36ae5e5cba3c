"""Gateway pages (admins): access tokens, and the MCP sessions clients opened with what they did."""
from __future__ import annotations

from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.gateway.endpoint import endpoint_path
from playground.gateway.forms import TokenForm
from playground.gateway.fragments import pending_prompts
from playground.gateway.prompts import answer_of
from playground.gateway.models import GatewayPrompt, GatewaySession, GatewayToken
from playground.gateway.service import answer_prompt, served_style
from playground.gateway.tokens import issue_token, revoke_token
from playground.access import ADMIN, role_required
from playground.mcp_servers import protocol_log
from playground.mcp_servers.protocol_views import export_transcript, render_transcript
from playground.registry.models import AgentProfile


@role_required(ADMIN)
@require_safe
def session_list(request):
    sessions = GatewaySession.objects.select_related("profile", "token").order_by("-last_seen_at")[:200]
    return render(request, "gateway/session_list.html", {"sessions": sessions})


@role_required(ADMIN)
@require_safe
def session_detail(request, pk: int):
    session = get_object_or_404(GatewaySession.objects.select_related("profile", "token"), pk=pk)
    events = list(session.events.order_by("sequence"))
    return render(request, "gateway/session_detail.html", {
        "session": session, "events": events, "after": events[-1].sequence if events else 0,
        "pending": pending_prompts(session), "served": served_style(session.profile),
    })


@role_required(ADMIN)
@require_safe
def session_protocol(request, pk: int):
    """The session's JSON-RPC transcript (the Protocol view, as for a server)."""
    session = get_object_or_404(GatewaySession.objects.select_related("profile"), pk=pk)
    return render_transcript(
        request, protocol_log.gateway_scope(session.pk),
        title=f"{session.client_name or 'Unknown client'} on {session.profile.name}: protocol",
        back_url=reverse("gateway:session_detail", args=[session.pk]), back_label="the session",
        export_url=reverse("gateway:session_protocol_export", args=[session.pk]), perspective="gateway",
    )


@role_required(ADMIN)
@require_safe
def session_protocol_export(request, pk: int):
    session = get_object_or_404(GatewaySession, pk=pk)
    return export_transcript(protocol_log.gateway_scope(session.pk), f"gateway-session-{session.pk}-protocol.json")


@role_required(ADMIN)
@require_POST
def prompt_answer(request, pk: int):
    """Allow or deny a call waiting under an `ask` rule; the first answer stands."""
    prompt = get_object_or_404(GatewayPrompt, pk=pk)
    answer = answer_of(request.POST.get("choice") or request.POST.get("answer"))
    if answer is None:
        return render(request, "gateway/_answer_error.html", {"message": "Answer allowed or denied."}, status=400)
    answer_prompt(prompt.pk, answer, user=request.user)
    return redirect("gateway:session_detail", prompt.session_id)


@role_required(ADMIN)
def token_list(request):
    created = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        row, secret = issue_token(form.cleaned_data["profile"], form.cleaned_data["name"], user=request.user)
        created = {"row": row, "secret": secret, "url": request.build_absolute_uri(endpoint_path(row.profile_id))}
        form = TokenForm()
    tokens = GatewayToken.objects.select_related("profile", "created_by").order_by("revoked_at", "-created_at")
    profiles = [
        {"profile": p, "url": request.build_absolute_uri(endpoint_path(p.pk))}
        for p in AgentProfile.objects.order_by("name")
    ]
    return render(request, "gateway/token_list.html", {"form": form, "tokens": tokens, "created": created, "profiles": profiles})


@role_required(ADMIN)
@require_POST
def token_revoke(request, pk: int):
    revoke_token(get_object_or_404(GatewayToken, pk=pk))
    return redirect("gateway:token_list")
