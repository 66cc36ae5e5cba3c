"""`{% conversation_prompt_card conv event answer shared as card %}`: a prompt event as the one card
template shows it (`prompts/_card.html`; conversations/prompts.py builds it)."""
from __future__ import annotations

from django import template

from playground.conversations.prompts import prompt_card

register = template.Library()


@register.simple_tag
def conversation_prompt_card(conversation, event, answer=None, shared=False):
    return prompt_card(conversation, event, answer or None, shared=bool(shared))
