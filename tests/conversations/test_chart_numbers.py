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
        turns.append(record_event(conversation, ev.TurnStarted(turn=per_message, provider="demo", model="m", wire="native",
                                                               tokens={"sent_tokens": 10, "baseline_tokens": 20})))
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert re.findall(r'data-testid="chart-turn">([^<]*)<', body) == ["#1", "#2", "#3", "#4", "#5"]
    assert re.search(r'data-testid="chart-turn">#5<', render_event_frame(conversation, turns[-1]))
    # a catch-up passes shared totals: the row comes unnumbered and the page numbers it by position
    assert 'data-testid="chart-turn"></span>' in render_event_frame(conversation, turns[-1], total={"sent": 1, "cost": 1, "baseline": 1, "turns": 5})


def test_turn_headers_count_as_the_chart_does(db, admin_user, admin_client):
    # Before: the headers said Turn 1, 2, 1, 2, 3 (the stored turn restarts per message) beside #1..#5.
    conversation = Conversation.objects.create(owner=admin_user)
    turns = [record_event(conversation, ev.TurnStarted(turn=per_message, provider="demo", model="m", wire="native"))
             for per_message in (1, 2, 1, 2, 3)]
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert re.findall(r'data-testid="turn-number">([^<]*)<', body) == ["1", "2", "3", "4", "5"]
    assert 'title="turn 3 of its message">Turn <span data-testid="turn-number">5<' in body
    assert re.search(r'data-testid="turn-number">5<', render_event_frame(conversation, turns[-1]))
    # a catch-up's shared totals cannot say: left blank, the page numbers it by position
    shared = {"sent": 1, "cost": 1, "baseline": 1, "turns": 5}
    assert 'data-testid="turn-number"></span>' in render_event_frame(conversation, turns[-1], total=shared)


def test_a_chart_row_counts_the_announcement_its_turn_header_counts(db, admin_user, admin_client):
    # Before: the row read "1356 / 226052" while its turn said 1356 sent + 9942 announcing deferred names.
    conversation = Conversation.objects.create(owner=admin_user)
    record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native",
                                              tokens={"sent_tokens": 1356, "baseline_tokens": 226052, "announcement_tokens": 9942}))
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert re.findall(r'data-testid="chart-num">([^<]*)<', body) == ["11298 / 226052"]
    assert "1356 in schemas + 9942 announcing deferred names vs 226052 with all tools" in body
