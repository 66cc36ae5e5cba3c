"""The token chart numbers turns across the whole conversation (the stored turn restarts with each message)."""
from __future__ import annotations

import re

from django.urls import reverse

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.fragments import render_event_frame
from playground.conversations.models import Conversation


def test_chart_rows_count_turns_over_the_conversation(db, admin_user, admin_client):
    conversation = Conversation.objects.create(owner=admin_user)
    turns = []
    for per_message in (1, 2, 1, 2, 3):  # two messages: 2 turns, then 3
        turns.append(record_event(conversation, ev.TurnStarted(turn=per_message, provider="demo", model="m", wire_style="native",
                                                               tokens={"sent_tokens": 10, "baseline_tokens": 20})))
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert re.findall(r'data-testid="chart-turn">([^<]*)<', body) == ["#1", "#2", "#3", "#4", "#5"]
    assert re.search(r'data-testid="chart-turn">#5<', render_event_frame(conversation, turns[-1]))
    # a catch-up passes shared totals: the row comes unnumbered and the page numbers it by position
    assert 'data-testid="chart-turn"></span>' in render_event_frame(conversation, turns[-1], total={"sent": 1, "cost": 1, "baseline": 1, "turns": 5})
