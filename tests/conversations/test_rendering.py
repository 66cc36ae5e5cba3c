"""One event, two renderings: the page's nested timeline and the socket frame target the same containers."""
from __future__ import annotations

import pytest

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.fragments import container_id, render_event_frame
from playground.conversations.models import Conversation
from playground.conversations.selectors import event_tree, token_numbers
from playground.engine.requests import TokenAccounting


@pytest.fixture
def nested(db, admin_user):
    """A turn with an Agent call whose subagent ran its own turn with a search."""
    conversation = Conversation.objects.create(owner=admin_user)
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native",
                                                     tokens={"sent_tokens": 300, "baseline_tokens": 1200}))
    call = record_event(conversation, ev.ToolCall(tool_use_id="t1", name="Agent", arguments={"prompt": "p"}),
                        turn_sequence=turn.sequence)
    sub_turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="m", wire="native", subagent="helper"),
                            parent_sequence=call.sequence)
    search = record_event(conversation, ev.ToolSearchQuery(
        tool_use_id="t2", query="time", backend="claude-code", loaded=["mcp__time__now"],
        scored=[{"name": "mcp__time__now", "score": 8.0, "breakdown": [{"term": "time", "rule": "exact name part", "points": 8.0,
                                                                        "field": "name", "detail": ""}]},
                {"name": "mcp__x__y", "score": 2.0, "breakdown": []}]),
        parent_sequence=call.sequence, turn_sequence=sub_turn.sequence)
    return conversation, turn, call, sub_turn, search


def test_the_tree_nests_turn_events_and_subagent_turns_under_their_call(nested):
    conversation, turn, call, sub_turn, search = nested
    roots = event_tree(list(conversation.events.order_by("sequence")))
    assert [n.event.sequence for n in roots] == [turn.sequence]
    assert [n.event.sequence for n in roots[0].children] == [call.sequence]
    assert [n.event.sequence for n in roots[0].children[0].children] == [sub_turn.sequence]
    assert [n.event.sequence for n in roots[0].children[0].children[0].children] == [search.sequence]
    assert [s["pct"] for s in roots[0].children[0].children[0].children[0].view["scored"]] == [100.0, 25.0]


def test_frames_go_into_the_containers_the_page_renders(nested, admin_client):
    conversation, turn, call, sub_turn, search = nested
    pk = conversation.pk
    assert container_id(pk, turn) == f"timeline-{pk}"
    assert container_id(pk, call) == f"turn-body-{pk}-{turn.sequence}"
    assert container_id(pk, sub_turn) == f"children-{pk}-{call.sequence}"
    assert container_id(pk, search) == f"turn-body-{pk}-{sub_turn.sequence}"
    frame = render_event_frame(conversation, search)
    assert f'<div id="turn-body-{pk}-{sub_turn.sequence}" hx-swap-oob="beforeend">' in frame
    assert 'class="scorebar" style="width: 25.0%"' in frame and f'data-frame-sequence="{search.sequence}"' in frame


def test_token_numbers_read_the_engine_accounting():
    numbers = token_numbers(TokenAccounting(sent_tokens=300, baseline_tokens=1200, source="estimate", announcement_tokens=60).to_dict())
    assert numbers == {"sent": 300, "announced": 60, "cost": 360, "baseline": 1200, "sent_pct": 30.0, "baseline_pct": 100.0,
                       "saved": 840, "saved_pct": 70.0, "request": 0, "window": 0, "over_window": False}


def test_a_request_over_the_context_window_is_flagged_on_its_turn_and_in_the_totals(nested):
    conversation, *_ = nested
    over = TokenAccounting(sent_tokens=226_052, baseline_tokens=226_052, source="estimate", request_tokens=239_016,
                           context_window=200_000)
    turn = record_event(conversation, ev.TurnStarted(turn=2, provider="demo", model="m", wire="native", tokens=over.to_dict()))
    frame = render_event_frame(conversation, turn)
    assert 'data-testid="over-window"' in frame
    assert "request of 239016 tokens, over the 200000-token context window: a real model would refuse this" in frame
    assert 'data-over-window="1" data-largest-request="239016" data-window="200000"' in frame
    fits = TokenAccounting(sent_tokens=1_000, baseline_tokens=226_052, source="estimate", request_tokens=12_000, context_window=200_000)
    third = record_event(conversation, ev.TurnStarted(turn=3, provider="demo", model="m", wire="native", tokens=fits.to_dict()))
    assert 'data-testid="over-window"' not in render_event_frame(conversation, third).split("tokens-total")[0]


def test_the_saving_counts_the_announced_names_as_the_engine_does():
    # The timeline said −99.4% where the model view, from the same accounting, said 94.9% saved.
    accounting = TokenAccounting(sent_tokens=1460, baseline_tokens=226944, source="estimate", announcement_tokens=10024)
    numbers = token_numbers(accounting.to_dict())
    assert numbers["saved"] == accounting.saved_tokens and numbers["saved_pct"] == accounting.saved_percent == 94.9


def test_a_turn_frame_carries_the_conversation_totals(nested, django_assert_num_queries):
    conversation, turn, *_ = nested
    second = record_event(conversation, ev.TurnStarted(turn=2, provider="demo", model="m", wire="native",
                                                       tokens={"sent_tokens": 100, "baseline_tokens": 1200}))
    frame = render_event_frame(conversation, second)
    # both top-level turns, not the subagent's
    assert 'data-tokens-sent="400" data-tokens-cost="400" data-tokens-baseline="2400"' in frame
    # A catch-up passes the totals it read once; the frame then reads nothing more.
    with django_assert_num_queries(0):
        frame = render_event_frame(conversation, turn, total={"sent": 7, "cost": 8, "baseline": 9, "turns": 2})
    assert 'data-tokens-sent="7" data-tokens-cost="8" data-tokens-baseline="9"' in frame


def test_a_turn_with_more_names_than_stored_shows_the_full_counts(nested):
    conversation, *_ = nested
    names = [f"mcp__s__tool_{i}" for i in range(1_000)]
    turn = record_event(conversation, ev.TurnStarted(turn=9, provider="demo", model="m", wire="native",
                                                     loaded_tools=["Read", "ToolSearch"], deferred_tools=names))
    frame = render_event_frame(conversation, turn)
    assert '<span data-testid="deferred-count">1000</span> deferred' in frame and "… 800 more" in frame
    assert "mcp__s__tool_199<" in frame and "mcp__s__tool_200<" not in frame
