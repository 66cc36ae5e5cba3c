"""Which permission prompts a person may answer, from every conversation and gateway session.

The rules are the answer views' own: a conversation's prompt is its owner's (an operator at least)
or any admin's (`conversations.selectors.conversations_to_act_on`); a gateway call's is an admin's,
as the gateway session pages are (`gateway.prompts.may_answer`).
"""
from __future__ import annotations

from playground.conversations.prompts import open_prompt_count as open_conversation_prompt_count
from playground.conversations.prompts import open_prompts as open_conversation_prompts
from playground.conversations.selectors import conversations_to_act_on
from playground.gateway.prompts import may_answer as may_answer_gateway
from playground.gateway.prompts import open_prompt_cards as open_gateway_prompts
from playground.gateway.prompts import open_prompt_count as open_gateway_prompt_count
from playground.prompt_cards import PromptCard


def inbox_cards(user) -> list[PromptCard]:
    """Every open prompt `user` may answer, oldest first (the one closest to its deadline on top)."""
    cards = open_conversation_prompts(conversations_to_act_on(user))
    if may_answer_gateway(user):
        cards += open_gateway_prompts()
    return sorted(cards, key=lambda card: (card.expires_at or card.asked_at, card.key))


def inbox_count(user) -> int:
    """What the navigation bar shows on every page: counted, not rendered (no card is built)."""
    count = open_conversation_prompt_count(conversations_to_act_on(user))
    return count + (open_gateway_prompt_count() if may_answer_gateway(user) else 0)
