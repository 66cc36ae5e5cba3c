"""The run lease (lease.py): a heartbeat while a worker runs a conversation, and what happens when it stops."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.signals import post_save
from django.urls import reverse
from django.utils import timezone

from playground.conversations import runs, services
from playground.conversations.events import PermissionPrompt, record_event
from playground.conversations.lease import RunLease, keeper
from playground.conversations.models import Conversation, Event, Message
from playground.conversations.tasks import run_conversation_task
from playground.conversations.testing.fake_api import InvalidRequest, message_reply, text_reply, tool_use_reply, validate_messages_request
from tests.polling import wait_until
from tests.conversations.conftest import converse, event_types, events_of

LOST = 60  # settings.AGENT_LOST_SECONDS in these tests


@pytest.fixture(autouse=True)
def lease_settings(settings):
    settings.AGENT_HEARTBEAT_SECONDS = 10
    settings.AGENT_LOST_SECONDS = LOST


def running(user, text="hi", *, heartbeat_age: float | None, status=Conversation.Status.RUNNING) -> Conversation:
    """A conversation whose run a worker claimed `heartbeat_age` seconds ago (None: not claimed yet)."""
    conversation = services.start_conversation(user)
    services.send_message(conversation, text, user=user, enqueue=False)
    beat = None if heartbeat_age is None else timezone.now() - timedelta(seconds=heartbeat_age)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=beat, status=status)
    conversation.refresh_from_db()
    return conversation


def lost_error(conversation) -> dict:
    errors = [e.payload for e in events_of(conversation, "error") if e.payload["kind"] == "worker_lost"]
    assert len(errors) == 1, errors
    return errors[0]


# -- who notices a lost worker ---------------------------------------------------------------------
def test_the_first_cancel_releases_a_run_whose_heartbeat_stopped(viewer_user):
    conversation = running(viewer_user, heartbeat_age=LOST + 65)
    assert services.request_cancel(conversation, user=viewer_user)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED
    assert conversation.run_token == "" and conversation.heartbeat_at is None
    error = lost_error(conversation)
    assert "no heartbeat for 125 s" in error["message"] and "Send the message again" in error["message"]


def test_a_run_with_a_fresh_heartbeat_is_only_asked_to_stop(viewer_user, settings):
    conversation = running(viewer_user, heartbeat_age=LOST - 20)
    assert services.request_cancel(conversation, user=viewer_user)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLING
    # Its worker is alive (it beats), so a second cancel leaves it to the worker too.
    services.request_cancel(conversation, user=viewer_user)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLING
    assert "error" not in event_types(conversation)


def test_a_cancel_that_waited_for_a_lost_worker_ends_cancelled(viewer_user):
    conversation = running(viewer_user, heartbeat_age=LOST + 1, status=Conversation.Status.CANCELLING)
    assert runs.release_lost_run(conversation)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED
    assert "Send the message again" not in lost_error(conversation)["message"]


def test_the_sweep_releases_only_runs_whose_heartbeat_stopped(viewer_user, settings):
    lost = running(viewer_user, heartbeat_age=LOST + 1)
    alive = running(viewer_user, heartbeat_age=1)
    queued = running(viewer_user, heartbeat_age=None)  # no worker has claimed it: not this rule's business
    assert runs.release_lost_runs() == 1
    statuses = dict(Conversation.objects.values_list("pk", "status"))
    assert statuses == {lost.pk: "failed", alive.pk: "running", queued.pk: "running"}
    assert runs.release_lost_runs() == 0  # released once, not twice


def test_the_conversation_page_shows_a_lost_run_as_released(viewer_client, viewer_user):
    conversation = running(viewer_user, heartbeat_age=LOST + 1)
    page = viewer_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert "stopped answering" in page
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED


def test_release_closes_an_open_permission_prompt(viewer_user):
    conversation = running(viewer_user, heartbeat_age=None)
    prompt = record_event(conversation, PermissionPrompt(tool_use_id="toolu_1", name="echo", arguments={}, reason="ask rule",
                                                         timeout_seconds=300), status=Conversation.Status.WAITING)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=LOST + 1))
    conversation.refresh_from_db()
    seen: list[tuple[str, str]] = []  # (event type, the conversation's status when the event was saved)

    def note_status(sender, instance, created, **kwargs):
        seen.append((instance.type, Conversation.objects.values_list("status", flat=True).get(pk=instance.conversation_id)))

    post_save.connect(note_status, sender=Event)
    try:
        assert runs.release_lost_run(conversation)
    finally:
        post_save.disconnect(note_status, sender=Event)
    # The page is never told "running" on the way: the prompt closes while waiting, then the run fails.
    assert seen == [("permission_answer", "waiting"), ("error", "failed")]
    answer = events_of(conversation, "permission_answer")[0].payload
    assert answer["prompt_sequence"] == prompt.sequence and answer["choice"] == "cancelled"
    with pytest.raises(services.ConversationError, match="already been answered"):
        services.answer_permission(conversation, prompt.sequence, "once")
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED


# -- after a release, the conversation goes on -------------------------------------------------------
def test_a_new_message_takes_over_a_lost_run_with_a_valid_history(admin_user, tool_world, native_profile, fake_api, claude):
    conversation = services.start_conversation(admin_user, profile=native_profile)
    services.send_message(conversation, "echo hi", user=admin_user, enqueue=False)
    # The worker stored the model's tool call, then died before any result.
    Message.objects.create(conversation=conversation, position=2, role="assistant",
                           content=[{"type": "tool_use", "id": "toolu_dead", "name": "echo", "input": {"text": "hi"}}])
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=LOST + 1))
    conversation.refresh_from_db()
    dangling = [{"role": m.role, "content": m.content} for m in conversation.messages.order_by("position")]
    dangling.append({"role": "user", "content": [{"type": "text", "text": "and now?"}]})
    with pytest.raises(InvalidRequest, match="without `tool_result`"):  # what the API would say without the repair
        validate_messages_request({"model": "claude-test", "max_tokens": 10, "messages": dangling,
                                   "tools": [{"name": "echo", "input_schema": {"type": "object"}}]})

    fake_api.script(text_reply("Sorry, that call was lost."))
    conversation, outcome = converse(admin_user, "and now?", provider=claude, conversation=conversation)

    assert outcome.reason == "end_turn" and conversation.status == Conversation.Status.IDLE
    sent = fake_api.message_requests[-1].body["messages"]
    result = sent[2]["content"][0]
    assert result["tool_use_id"] == "toolu_dead" and result["is_error"] is True
    assert "stopped answering" in result["content"][0]["text"]
    kinds = event_types(conversation)
    assert kinds.index("error") < len(kinds) - 1 - kinds[::-1].index("message")  # the release comes before the new message
    assert lost_error(conversation)


# -- the lease itself (the process's keeper thread has its own database connection) -------------------
@pytest.mark.django_db(transaction=True)
def test_the_lease_beats_while_the_run_lasts_and_stops_with_it(viewer_user):
    conversation = running(viewer_user, heartbeat_age=None)
    with RunLease(conversation.pk, "not-the-current-run", interval=0.05) as stranger:
        assert not stranger.claimed and not stranger.held and keeper().holding() == 0
    with RunLease(conversation.pk, conversation.run_token, interval=0.05) as lease:
        assert lease.claimed and keeper().holding() == 1
        claimed_at = Conversation.objects.get(pk=conversation.pk).heartbeat_at
        wait_until(lambda: lease.beats >= 3, "three heartbeats", 10)
        assert Conversation.objects.get(pk=conversation.pk).heartbeat_at > claimed_at
    assert keeper().holding() == 0
    wait_until(lambda: keeper().thread is None, "the keeper's thread to end with its last lease", 10)


@pytest.mark.django_db(transaction=True)
def test_the_keeper_lets_go_of_a_run_taken_from_it(viewer_user):
    conversation = running(viewer_user, heartbeat_age=None)
    with RunLease(conversation.pk, conversation.run_token, interval=0.05) as lease:
        Conversation.objects.filter(pk=conversation.pk).update(run_token="newer")
        wait_until(lambda: not lease.held, "the keeper to let go of the lease", 10)
        beats = lease.beats
        wait_until(lambda: keeper().thread is None, "the keeper's thread to end", 10)
        assert lease.beats == beats  # nothing written for a run that no longer owns the conversation


@pytest.mark.django_db(transaction=True)
def test_one_keeper_thread_beats_many_runs_and_carries_a_cancel_to_the_right_one(viewer_user):
    conversations = [running(viewer_user, heartbeat_age=None) for _ in range(5)]
    threads_before = {t.ident for t in threading.enumerate()}
    leases = [RunLease(c.pk, c.run_token, interval=0.05, cancel_poll=0.05) for c in conversations]
    try:
        assert all(lease.claim() for lease in leases)
        wait_until(lambda: all(lease.beats >= 2 for lease in leases), "every lease beaten twice", 10)
        new_threads = [t for t in threading.enumerate() if t.ident not in threads_before]
        assert [t.name for t in new_threads] == ["run-leases"]  # one for all five, not one per run
        Conversation.objects.filter(pk=conversations[2].pk).update(status=Conversation.Status.CANCELLING)
        wait_until(lambda: leases[2].cancel.is_set(), "the cancel carried to its run", 10)
        assert [lease.cancel.is_set() for lease in leases] == [False, False, True, False, False]
    finally:
        for lease in leases:
            lease.release()


@pytest.mark.django_db(transaction=True)
def test_a_task_for_a_run_that_no_longer_owns_the_conversation_does_nothing(viewer_user):
    conversation = running(viewer_user, heartbeat_age=None)
    before = event_types(conversation)
    assert run_conversation_task.apply(args=(conversation.pk, "an-older-run")).get() == "superseded"
    assert event_types(conversation) == before
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.RUNNING and conversation.heartbeat_at is None


@pytest.mark.django_db(transaction=True)
def test_a_run_released_while_it_ran_stops_without_writing(admin_user, tool_world, native_profile, fake_api, claude):
    conversation = services.start_conversation(admin_user, profile=native_profile)
    services.send_message(conversation, "echo hi", user=admin_user, enqueue=False)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now())

    def given_up_on_meanwhile(body):
        # While this worker waits for the model, the others decide it is gone (its heartbeat looks old).
        Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=LOST + 1))
        try:
            assert runs.release_lost_run(Conversation.objects.get(pk=conversation.pk))
        finally:
            connection.close()
        return tool_use_reply("echo", {"text": "hi"})

    fake_api.script(given_up_on_meanwhile)
    from playground.conversations.loop import run_conversation

    outcome = run_conversation(conversation.pk, provider=claude)

    assert outcome.reason == "released"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED
    last = Event.objects.filter(conversation=conversation).order_by("-sequence").first()
    assert last.type == "error" and last.payload["kind"] == "worker_lost"  # nothing written after the release
    assert list(conversation.messages.values_list("role", flat=True)) == ["user"]  # the late reply was not stored
    assert len(fake_api.message_requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_run_completes_under_a_heartbeat_every_few_milliseconds(admin_user, tool_world, native_profile, settings, caplog):
    # The lease keeper writes while the loop writes: on SQLite both take the one write lock.
    settings.AGENT_HEARTBEAT_SECONDS = 0.005
    conversation = services.start_conversation(admin_user, profile=native_profile, provider="demo")
    services.send_message(conversation, "What time is it in Tokyo?", user=admin_user, enqueue=False)
    conversation.refresh_from_db()
    assert run_conversation_task.apply(args=(conversation.pk, conversation.run_token)).get() == "end_turn"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert "tool_result" in event_types(conversation) and "error" not in event_types(conversation)
    assert "could not look after" not in caplog.text


# -- a run paused on a permission prompt has no worker, so no heartbeat ---------------------------------
def test_a_paused_run_rests_its_heartbeat_and_is_never_released_as_lost(admin_user, tool_world, native_profile, fake_api,
                                                                        claude):
    from playground.conversations.lease import rest_paused_run
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "echo hi", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting"
    # The task that paused it leaves a heartbeat behind: it is cleared once that task has ended.
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=LOST + 1))
    rest_paused_run(conversation.pk, conversation.run_token)
    conversation.refresh_from_db()
    assert conversation.heartbeat_at is None
    assert runs.release_lost_runs() == 0
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING and conversation.paused_run is not None


def test_releasing_a_paused_run_keeps_the_results_of_calls_that_ran_before_the_prompt(admin_user, tool_world, native_profile,
                                                                                         fake_api, claude):
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(message_reply([
        {"type": "tool_use", "id": "toolu_calc", "name": "calculator", "input": {"expression": "1+1"}},
        {"type": "tool_use", "id": "toolu_echo", "name": "echo", "input": {"text": "hi"}},
    ], stop_reason="tool_use"))
    conversation, outcome = converse(admin_user, "calc then echo", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting" and conversation.paused_run["index"] == 1
    # The worker that paused it died before it could clear its heartbeat (rest_paused_run).
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=LOST + 1))
    conversation.refresh_from_db()
    assert runs.release_lost_run(conversation)
    last = Message.objects.filter(conversation=conversation).order_by("-position").first()
    assert [b["tool_use_id"] for b in last.content] == ["toolu_calc", "toolu_echo"]
    assert not last.content[0].get("is_error") and last.content[1]["is_error"]
    conversation.refresh_from_db()
    assert conversation.paused_run is None and conversation.status == Conversation.Status.FAILED
