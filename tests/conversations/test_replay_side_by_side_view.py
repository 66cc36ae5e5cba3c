"""A replay beside its origin (replay_views.replay_view and its figures fragment): both conversations'
panels, and per turn the tokens, cache reads and writes and dollars read from the model responses."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from playground.conversations import replays, services
from playground.conversations.costs import call_cost
from playground.conversations.models import Conversation
from playground.engine.pricing import Usage, priced_model
from tests.conversations.conftest import converse, events_of, work

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_keys(settings):
    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""


@pytest.fixture
def replayed(admin_user, tool_world, native_profile, off_profile):
    """The demo agent answered "What time is it in Tokyo?" with tool search on; the replay runs it with every tool loaded."""
    origin, outcome = converse(admin_user, "What time is it in Tokyo?", profile=native_profile)
    assert outcome.reason == "end_turn"
    replay = work(replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=off_profile)).pk)
    assert replay.status == Conversation.Status.IDLE
    return origin, replay


def cells(page: str, testid: str) -> list[str]:
    return re.findall(rf'data-testid="{testid}" data-value="([^"]*)"', page)


def expected_turns(conversation: Conversation) -> list[tuple[int, int, int, int, float]]:
    """Per main turn, from the events: input uncached, cache read, cache write, output, dollars."""
    turns = []
    for turn in events_of(conversation, "turn_started"):
        usage, dollars = Usage(), 0.0
        for response in events_of(conversation, "model_response"):
            if response.turn_sequence == turn.sequence:
                usage += Usage.of(response.payload["usage"])
                dollars += call_cost(response.payload["usage"], priced_model(response.payload.get("model"), turn.payload.get("model")),
                                     str(response.payload.get("cache_ttl") or ""))
        turns.append((usage.uncached, usage.cache_read, usage.cache_write, usage.output, round(dollars, 6)))
    return turns


def test_the_page_shows_both_conversations_and_links_them(admin_client, replayed):
    origin, replay = replayed
    page = admin_client.get(reverse("conversations:replay_view", args=[replay.pk])).content.decode()
    assert f'id="conversation-{origin.pk}"' in page and f'id="conversation-{replay.pk}"' in page
    assert reverse("conversations:replay_figures", args=[replay.pk]) in page
    origin_page = admin_client.get(reverse("conversations:detail", args=[origin.pk])).content.decode()
    replay_page = admin_client.get(reverse("conversations:detail", args=[replay.pk])).content.decode()
    assert reverse("conversations:replay_view", args=[replay.pk]) in origin_page  # "Replays: #n"
    assert f"Side by side with its origin #{origin.pk}" in replay_page


def test_the_figures_are_the_events_figures_turn_by_turn(admin_client, replayed):
    origin, replay = replayed
    page = admin_client.get(reverse("conversations:replay_figures", args=[replay.pk])).content.decode()
    assert 'data-done="true"' in page and "Replayed: 1 message of the person's re-sent." in page
    for conversation, side in ((origin, "origin"), (replay, "replay")):
        turns = expected_turns(conversation)
        shown = list(zip(*(cells(page, f"{side}-{part}") for part in ("input", "cache-read", "cache-write", "output", "cost"))))
        assert [tuple(int(v) for v in row[:4]) + (round(float(row[4]), 6),) for row in shown[:-1]] == turns  # the last: the total
        total = [sum(t[i] for t in turns) for i in range(5)]
        assert [int(v) for v in shown[-1][:4]] == total[:4] and float(shown[-1][4]) == pytest.approx(total[4], abs=1e-6)
    # Tool search on needed a search round trip: the origin took more turns than the all-tools replay.
    assert len(expected_turns(origin)) > len(expected_turns(replay))
    # The compare view's accounting beside them, for the same two conversations.
    assert 'data-testid="compare-figures"' in page and 'data-testid="figures-cost-split"' in page


def test_a_watcher_sees_the_side_by_side_page(client, django_user_model, replayed):
    viewer = django_user_model.objects.create_user("vera")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    _origin, replay = replayed
    page = client.get(reverse("conversations:replay_view", args=[replay.pk])).content.decode()
    assert 'data-testid="watch-only"' in page and 'data-testid="replay-link"' not in page


def test_a_conversation_that_is_no_replay_has_no_side_by_side(admin_client, admin_user):
    conversation = services.start_conversation(admin_user)
    response = admin_client.get(reverse("conversations:replay_view", args=[conversation.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("conversations:detail", args=[conversation.pk])
    assert admin_client.get(reverse("conversations:replay_figures", args=[conversation.pk])).status_code == 404
    assert admin_client.get(reverse("conversations:replay_view", args=[999999])).status_code == 404


def test_an_origin_deleted_since_leaves_the_replay_alone(admin_client, replayed):
    origin, replay = replayed
    origin_id = origin.pk
    origin.delete()
    page = admin_client.get(reverse("conversations:replay_view", args=[replay.pk])).content.decode()
    assert f"The origin #{origin_id} is gone" in page and f'id="conversation-{replay.pk}"' in page
    figures = admin_client.get(reverse("conversations:replay_figures", args=[replay.pk]))
    assert figures.status_code == 200 and cells(figures.content.decode(), "replay-input")
