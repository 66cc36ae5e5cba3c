"""Dollars on the conversation page: each model call and the total, from the one price table, live and on reload."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from playground.conversations import events as ev
from playground.conversations.costs import conversation_cost
from playground.conversations.events import record_event
from playground.conversations.fragments import render_event_frame
from playground.conversations.models import Conversation


def model_call(conversation, usage, *, model="claude-sonnet-4-5", named=True, ttl="5m"):
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="anthropic", model=model, wire="native"))
    return record_event(conversation, ev.ModelResponse(stop_reason="end_turn", usage=usage, duration_ms=10,
                                                       model=model if named else "", cache_ttl=ttl), turn_sequence=turn.sequence)


def shown_total(body: str) -> float:
    return float(re.search(r'data-testid="cost-total" data-cost-usd="([0-9.]+)"', body).group(1))


def test_each_call_and_the_total_are_priced_from_the_table(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    model_call(conversation, {"input": 1000, "output": 100})  # 1000·$3 + 100·$15 per million
    model_call(conversation, {"input": 10, "output": 10, "cache_write": 1000, "cache_read": 2000}, ttl="1h")  # write at 2×, read at 0.1×
    model_call(conversation, {"input": 1000, "output": 1000}, model="claude-haiku-4-5", named=False)  # an older event: its turn's model
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    calls = re.findall(r'data-testid="call-cost" data-cost-usd="([0-9.e-]+)"', body)
    assert [float(c) for c in calls] == pytest.approx([0.0045, (30 + 150 + 6000 + 600) / 1e6, 0.006])
    assert shown_total(body) == pytest.approx(0.0045 + 0.00678 + 0.006)
    assert "$0.0045" in body and "over 3 model calls" in body


def test_a_model_without_a_price_says_so(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    model_call(conversation, {"input": 1000, "output": 100}, model="mystery-model")
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="call-cost" data-cost-usd=""' in body and "no price for mystery-model" in body
    assert "(0 priced; no price for mystery-model)" in body


def test_a_live_frame_carries_the_new_total(db, admin_user, settings):
    conversation = Conversation.objects.create(owner=admin_user)
    model_call(conversation, {"input": 1000, "output": 100})
    response = model_call(conversation, {"input": 2000, "output": 0})
    frame = render_event_frame(conversation, response)
    assert 'id="cost-total-%d"' % conversation.pk in frame and 'hx-swap-oob="outerHTML"' in frame
    assert shown_total(frame) == pytest.approx(0.0045 + 0.006) == conversation_cost(conversation.pk).usd
    settings.PRICE_TABLE = '{"claude-sonnet-4-5": {"input": 30, "output": 150}}'  # a corrected table corrects every figure
    assert conversation_cost(conversation.pk).usd == pytest.approx(0.045 + 0.06)
