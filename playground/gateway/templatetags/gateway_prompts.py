"""`{% gateway_prompt_card session event as card %}`: a waiting call as the one card template shows it
(`prompts/_card.html`; gateway/prompts.py builds it)."""
from __future__ import annotations

from django import template

from playground.gateway.prompts import event_card

register = template.Library()


@register.simple_tag
def gateway_prompt_card(session, event):
    return event_card(session, event)
