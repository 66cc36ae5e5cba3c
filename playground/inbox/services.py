"""Answering a prompt from the inbox: handed to the service of the prompt's own page, with its checks."""
from __future__ import annotations

from typing import Any

from playground.conversations.models import Conversation
from playground.conversations.runs import ConversationError
from playground.conversations.selectors import can_act
from playground.conversations.services import PERMISSION_CHOICES, answer_permission
from playground.gateway.models import GatewayPrompt
from playground.gateway.prompts import answer_of, may_answer as may_answer_gateway
from playground.gateway.service import answer_prompt as answer_gateway_prompt
from playground.prompt_cards import CONVERSATION, GATEWAY
from playground.realtime import frame_int

NO_SUCH_PROMPT = "There is no such prompt for you to answer."


def answer(user, data: dict[str, Any]) -> str:
    """Answer the prompt `data` names (a card's fields and its button's choice). "" when done, else
    what went wrong, in words (an unknown prompt, one answered first, a choice it does not take)."""
    source, choice = str(data.get("source") or ""), str(data.get("choice") or "")
    prompt = frame_int(data.get("prompt"), 0)
    if source == CONVERSATION:
        conversation = Conversation.objects.filter(pk=frame_int(data.get("conversation"), 0)).first()
        if conversation is None or not can_act(user, conversation):
            return NO_SUCH_PROMPT
        if choice not in PERMISSION_CHOICES:
            return f"Unknown answer {choice!r}: choose once, always or deny."
        try:
            answer_permission(conversation, prompt, choice, user=user)
        except ConversationError as exc:
            return str(exc)
        return ""
    if source == GATEWAY:
        if not may_answer_gateway(user) or not GatewayPrompt.objects.filter(pk=prompt).exists():
            return NO_SUCH_PROMPT
        status = answer_of(choice)
        if status is None:
            return f"Unknown answer {choice!r}: choose once or deny."
        if not answer_gateway_prompt(prompt, status, user=user):
            return "That prompt was already answered (the first answer stands)."
        return ""
    return NO_SUCH_PROMPT
