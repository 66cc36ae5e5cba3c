"""Socket frames: one saved event as out-of-band HTML fragments for the htmx ws extension.

A frame holds the event rendered by `conversations/_event.html` (the template the full page uses),
appended to its container (the timeline, its turn, or the Agent call it belongs to), plus the chat
item, chart row or answered prompt it changes, and the conversation's status. The status element
carries `data-frame-sequence` so the browser can drop a frame it already has.
"""
from __future__ import annotations

from django.template.loader import render_to_string

from playground.conversations.costs import conversation_cost
from playground.conversations.models import Conversation, Event
from playground.conversations.selectors import (
    CHAT_ONLY_TYPES,
    CHAT_TYPES,
    EventNode,
    cache_total_for,
    event_view,
    token_numbers,
    tokens_total_for,
    turn_wire,
)


# What a shared (anonymous) page and its frames call the conversation in element ids, instead of
# its database id: an audience without accounts sees no internal id (sharing.py).
SHARED_KEY = "shared"


def container_id(conversation_id: int | str, event: Event) -> str:
    if event.turn_sequence:
        return f"turn-body-{conversation_id}-{event.turn_sequence}"
    if event.parent_sequence:
        return f"children-{conversation_id}-{event.parent_sequence}"
    return f"timeline-{conversation_id}"


def render_event_frame(conversation: Conversation, event: Event, *, total: dict[str, int] | None = None,
                       shared: bool = False) -> str:
    """`total`: the conversation's token totals, when the caller already has them (a catch-up of many turns).
    `shared`: the frame for a share link's anonymous page: no forms that act, no account names, no
    internal id (SHARED_KEY in the element ids)."""
    node = EventNode(event, event_view(event))
    top_level_turn = event.type == "turn_started" and not event.parent_sequence
    context = {
        "conv": conversation,
        "node": node,
        "event": event,
        "container": container_id(SHARED_KEY if shared else conversation.pk, event),
        "shared": shared,
        "conv_key": SHARED_KEY if shared else "",
        "in_timeline": event.type not in CHAT_ONLY_TYPES,
        "in_chat": event.type in CHAT_TYPES,
        "chart_row": None,
        "wire": None,
        "total": (total if total is not None else tokens_total_for(conversation.pk)) if top_level_turn else None,
        "answered_prompt": None,
        # A model call changes the conversation's dollars: the total is read again (usage only, no content).
        "cost": conversation_cost(conversation.pk) if event.type == "model_response" else None,
        # A strip changes the conversation's cache figures (the header, and the compare view's).
        "cache": cache_total_for(conversation.pk) if event.type == "cache_strip" else None,
        # No request behind a socket frame: its forms are sent over the socket (ws-send), and a page
        # load renders the POST fallbacks with a real token. Django's own "no token" value.
        "csrf_token": "NOTPROVIDED",
    }
    if top_level_turn:
        # Read fresh, the totals count this turn last: its number in the conversation. A catch-up's
        # shared totals cannot say, so the row is left unnumbered and the page numbers it (conversations.js).
        number = context["total"]["turns"] if total is None else None
        context["chart_row"] = {"event": event, "numbers": token_numbers(event.payload.get("tokens") or {}), "number": number}
        node.view["number"] = number  # the turn's header counts as the chart does
        context["wire"] = {"style": turn_wire(event.payload or {}), "source": "turn"}  # the header's, as on reload
    if event.type == "permission_answer":
        prompt = Event.objects.filter(conversation_id=conversation.pk, sequence=event.payload.get("prompt_sequence"),
                                      type="permission_prompt").first()
        if prompt is not None:
            context["answered_prompt"] = EventNode(prompt, {}, answer=event)
    return render_to_string("conversations/_frame.html", context)


def render_notice(conversation_id: int | str, text: str, *, kind: str = "") -> str:
    """The line under the chat: an error (the default) or, with kind="info", news that is not one."""
    return render_to_string("conversations/_notice.html",
                            {"conversation_id": conversation_id, "text": text, "kind": kind, "oob": True})
