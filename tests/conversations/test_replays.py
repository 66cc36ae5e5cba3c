"""Replay and fork (replays.py): the person's messages re-sent in a new conversation through the Celery
tasks' own code, the origin's permission answers reused for the same call and asked again otherwise,
the link to the origin stored; bad input refused with the reason."""
from __future__ import annotations

import pytest

from playground.conversations import replays, services
from playground.conversations.models import Conversation
from playground.conversations.replay_figures import side_by_side
from playground.conversations.selectors import conversation_export_data
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from playground.engine.pricing import Usage
from playground.registry.models import PermissionRule
from tests.conversations.conftest import events_of, work

pytestmark = pytest.mark.django_db


@pytest.fixture
def claude_settings(settings, fake_api):
    """The conversations' own provider (as a worker builds it) is Claude against the local double."""
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "sk-test", fake_api.url
    return fake_api


def answer_last_prompt(conversation: Conversation, choice: str, user) -> Conversation:
    prompt = events_of(conversation, "permission_prompt")[-1]
    services.answer_permission(conversation, prompt.sequence, choice, user=user)
    return work(conversation.pk)


@pytest.fixture
def origin(admin_user, tool_world, native_profile, claude_settings):
    """Two messages; the first's echo approved once, the second's denied."""
    PermissionRule.objects.create(effect="ask", pattern="echo")
    claude_settings.script(tool_use_reply("echo", {"text": "one"}), text_reply("said one"),
                           tool_use_reply("echo", {"text": "two"}), text_reply("two was refused"))
    conversation = services.start_conversation(admin_user, profile=native_profile, provider="anthropic")
    for text, choice in (("echo one", "once"), ("echo two", "deny")):
        services.send_message(conversation, text, user=admin_user)
        assert work(conversation.pk).status == Conversation.Status.WAITING
        assert answer_last_prompt(conversation, choice, admin_user).status == Conversation.Status.IDLE
    return Conversation.objects.get(pk=conversation.pk)


def test_a_replay_re_sends_the_messages_reuses_answers_for_the_same_call_and_asks_for_others(
        origin, admin_user, client_profile, claude_settings):
    sent_before = len(claude_settings.message_requests)
    claude_settings.script(
        tool_use_reply("echo", {"text": "one"}), text_reply("said one"),  # the same call: the origin's "once"
        tool_use_reply("echo", {"text": "two"}),  # the same call: the origin's "deny"
        tool_use_reply("echo", {"text": "zwei"}),  # a call the origin never made: asked again
        text_reply("done"))
    replay = replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=client_profile))
    assert replay.replay_of_id == origin.pk and replay.owner == admin_user
    assert replay.profile_snapshot["name"] == "client" and replay.provider == "anthropic"  # the origin's vendor kept

    replay = work(replay.pk)
    assert replay.status == Conversation.Status.WAITING  # on the "zwei" call, which nobody answered before
    assert replays.person_messages(replay) == ["echo one", "echo two"] == replays.person_messages(origin)
    answers = [e.payload for e in events_of(replay, "permission_answer")]
    assert [a["choice"] for a in answers] == ["once", "deny"]
    assert all(a["note"] == replays.REUSED_NOTE and a["answered_by"] == "alice" for a in answers)
    waiting = events_of(replay, "permission_prompt")[-1]
    assert waiting.payload["arguments"] == {"text": "zwei"} and replay.paused_run["prompt_sequence"] == waiting.sequence

    replay = answer_last_prompt(replay, "once", admin_user)
    assert replay.status == Conversation.Status.IDLE
    assert replays.progress(replay)["done"] and replay.replay_plan["sent"] == 2
    results = {tuple(e.payload["content"][0]["text"].split()[:1]): e.payload.get("is_error") for e in events_of(replay, "tool_result")}
    assert results[("one",)] is False and results[("zwei",)] is False  # approved (reused, then by the person): they ran
    denied = [e for e in events_of(replay, "tool_result") if e.payload.get("refusal") == "person_denied"]
    assert len(denied) == 1  # "two": denied by the reused answer, never run
    # The replay's requests carried the person's messages, in order, on the client wire style.
    bodies = [r.body for r in claude_settings.message_requests[sent_before:]]
    people = [m["content"][0]["text"] for m in bodies[-1]["messages"]
              if m["role"] == "user" and m["content"] and m["content"][0].get("type") == "text"]
    assert people[:2] == ["echo one", "echo two"]
    assert origin.replays.get() == replay
    assert conversation_export_data(replay)["conversation"]["replay_of"] == origin.pk
    assert str(origin.pk) not in replay.title  # a share link shows the title: no other conversation's id in it


def test_the_side_by_side_figures_are_the_responses_usage_per_turn(origin, admin_user, claude_settings):
    claude_settings.script(tool_use_reply("echo", {"text": "one"}), text_reply("said one"))
    replay = work(replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=origin.profile, through=1)).pk)
    assert replay.status == Conversation.Status.IDLE and replay.replay_plan["messages"] == ["echo one"]
    figures = side_by_side(origin, replay)
    assert [(r["message"], r["turn"]) for r in figures["rows"]] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for conversation, side in ((origin, "origin"), (replay, "replay")):
        expected = per_turn_usage(conversation)
        shown = {(r["message"], r["turn"]): (r[side]["input"], r[side]["cache_read"], r[side]["cache_write"], r[side]["output"])
                 for r in figures["rows"] if r[side]}
        assert shown == expected and len(shown) == (4 if side == "origin" else 2)
        total = Usage()
        for response in events_of(conversation, "model_response"):
            total += Usage.of(response.payload.get("usage"))
        assert figures["totals"][side]["input"] == total.uncached > 0 and figures["totals"][side]["output"] == total.output
    assert figures["rows"][2]["replay"] is None and figures["rows"][2]["difference"] == {}  # message 2 was not replayed
    assert figures["rows"][0]["difference"]["input"] == figures["rows"][0]["replay"]["input"] - figures["rows"][0]["origin"]["input"]


def per_turn_usage(conversation: Conversation) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    """Each main turn's responses' usage, read from the events (message number, turn within it)."""
    usage: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    message = turn = 0
    for event in conversation.events.order_by("sequence"):
        if event.type == "message" and event.payload["role"] == "user":
            message, turn = message + 1, 0
        elif event.type == "turn_started":
            turn += 1
        elif event.type == "model_response":
            u = Usage.of(event.payload["usage"])
            before = usage.get((message, turn), (0, 0, 0, 0))
            usage[(message, turn)] = tuple(a + b for a, b in zip(before, (u.uncached, u.cache_read, u.cache_write, u.output)))
    return usage


def test_answers_are_taken_only_from_the_messages_replayed(origin):
    assert [a["choice"] for a in replays.origin_answers(origin, 1)] == ["once"]
    assert [a["choice"] for a in replays.origin_answers(origin, 2)] == ["once", "deny"]
    assert replays.reused_answer(Conversation(replay_plan={"answers": replays.origin_answers(origin, 2)}), "echo",
                                 {"text": "two"})["choice"] == "deny"
    assert replays.reused_answer(Conversation(replay_plan={"answers": replays.origin_answers(origin, 2)}), "echo",
                                 {"text": "two", "more": 1}) is None


@pytest.mark.parametrize("through, expected", [(0, "Turn 0 is out of range"), (3, "Turn 3 is out of range")])
def test_a_turn_out_of_range_is_refused(origin, admin_user, through, expected):
    with pytest.raises(replays.ReplayError, match=expected):
        replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=None, through=through))
    assert not Conversation.objects.filter(replay_of=origin).exists()


def test_an_origin_still_running_is_refused(origin, admin_user):
    Conversation.objects.filter(pk=origin.pk).update(status=Conversation.Status.RUNNING)
    origin.refresh_from_db()
    with pytest.raises(replays.ReplayError, match="is still running"):
        replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=None))


def test_a_conversation_that_is_no_replay_sends_nothing_after_its_run(admin_user, tool_world, native_profile):
    conversation = services.start_conversation(admin_user, profile=native_profile)
    assert replays.send_next_message(conversation.pk) is False
    assert not events_of(conversation, "message")


def test_a_cancelled_replay_stops_there(origin, admin_user):
    replay = replays.start_replay(origin, admin_user, replays.ReplayChoice(profile=origin.profile))
    assert services.request_cancel(replay, user=admin_user)  # queued, no worker yet: cancelled at once
    replay = work(replay.pk)
    assert replay.status == Conversation.Status.CANCELLED and replays.send_next_message(replay.pk) is False
    assert replays.person_messages(replay) == ["echo one"]  # the second message was never sent
    assert replays.progress(replay)["stopped"] and not replays.progress(replay)["done"]
