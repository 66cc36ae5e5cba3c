"""Socket frames for a gateway session's page: one saved event rendered by `gateway/_event.html`
(the template the full page uses), appended to the page's list out of band, plus what it changes
elsewhere on the page (the discovered tools; an answered prompt's buttons going away)."""
from __future__ import annotations

from django.template.loader import render_to_string

from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession


def pending_prompts(session: GatewaySession) -> set[int]:
    return set(session.prompts.filter(status=GatewayPrompt.Status.PENDING).values_list("pk", flat=True))


def render_event_frame(session: GatewaySession, event: GatewayEvent, pending: set[int]) -> str:
    answered = None
    if event.type == GatewayEvent.Type.PERMISSION_ANSWERED:
        answered = session.events.filter(type=GatewayEvent.Type.PERMISSION_ASKED,
                                         payload__prompt_id=event.payload.get("prompt_id")).first()
    return render_to_string("gateway/_frame.html", {
        "session": session, "event": event, "pending": pending, "answered": answered,
        # No request behind a socket frame: its forms are sent over the socket (ws-send); a page
        # load renders the POST fallbacks with a real token. Django's own "no token" value.
        "csrf_token": "NOTPROVIDED",
    })


def render_notice(session_pk: int, text: str) -> str:
    return render_to_string("gateway/_notice.html", {"session_pk": session_pk, "text": text, "oob": True})
