"""The run host (run_host.py): a worker process carries many runs at once on its event loop.

Every run here goes through the real path a worker takes after the task's hand-over: the lease is
claimed, the loop runs in a greenlet on the process's portal loop, the official `anthropic` SDK
(async client) calls the local Messages API double, events are saved and broadcast. The double's
replies wait on a barrier: they are answered only once every run's request is in flight at once, so
runs that held a thread each beyond the loop's, or ran one after another, would fail here.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from playground.conversations import services
from playground.conversations.events import RunCancelled
from playground.conversations.lease import keeper
from playground.conversations.models import Conversation
from playground.conversations.run_host import RunHost, run_ended
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from playground.per_process import portal
from tests.conversations.conftest import event_types
from tests.polling import wait_until

RUNS = 12


@pytest.fixture
def anthropic_double(settings, fake_api):
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "sk-test", fake_api.url
    settings.ANTHROPIC_MAX_RETRIES, settings.ANTHROPIC_TIMEOUT_SECONDS = 0, 30
    settings.AGENT_CANCEL_POLL_SECONDS = 0.05
    yield fake_api
    portal().start_run(connections.close_all).result(10)  # the loop thread's shared connection


def started(user, profile, text: str) -> Conversation:
    conversation = services.start_conversation(user, profile=profile, provider="anthropic")
    services.send_message(conversation, text, user=user, enqueue=False)
    conversation.refresh_from_db()
    return conversation


@pytest.mark.django_db(transaction=True)
def test_many_runs_wait_on_the_model_at_once_without_a_thread_each(admin_user, tool_world, native_profile, anthropic_double):
    together = threading.Barrier(RUNS, timeout=60)

    def when_all_are_waiting(reply):
        def answer(body):
            together.wait()  # raises BrokenBarrierError (the run fails) unless all RUNS calls are in flight at once
            return reply
        return answer

    # Each run: a tool call, then a reply; both rounds of calls meet at the barrier.
    anthropic_double.script(*[when_all_are_waiting(tool_use_reply("echo", {"text": "hi"})) for _ in range(RUNS)],
                            *[when_all_are_waiting(text_reply("Done.")) for _ in range(RUNS)])
    conversations = [started(admin_user, native_profile, f"echo hi #{number}") for number in range(RUNS)]
    host = RunHost(capacity=RUNS)
    ended: list[int] = []

    def note_end(conversation_id, **_):
        ended.append(conversation_id)

    run_ended.connect(note_end, weak=False)
    portal()  # the loop's thread exists before counting
    threads_before = {thread.ident for thread in threading.enumerate()}
    futures = [host.start(c.pk, c.run_token) for c in conversations]
    assert all(future is not None for future in futures)
    wait_until(lambda: host.running() == RUNS and len(anthropic_double.message_requests) >= RUNS,
               "every run's first model call in flight", 60)
    # The runs' own threads: none. The lease keeper is the one thread added for all of them (besides
    # the double's request threads, and asyncio's resolver threads the SDK's connections use).
    added = [thread.name for thread in threading.enumerate() if thread.ident not in threads_before
             and "process_request_thread" not in thread.name and not thread.name.startswith("asyncio_")]
    assert added in (["run-leases"], []) and keeper().holding() == RUNS
    assert [future.result(90) for future in futures] == ["end_turn"] * RUNS
    run_ended.disconnect(note_end)
    assert sorted(ended) == sorted(c.pk for c in conversations)  # what task runs step on (agenteval/tasks.py)
    for conversation in conversations:
        conversation.refresh_from_db()
        assert conversation.status == Conversation.Status.IDLE and conversation.heartbeat_at is not None
        kinds = event_types(conversation)
        assert kinds.count("model_response") == 2 and "error" not in kinds
        sequences = list(conversation.events.order_by("sequence").values_list("sequence", flat=True))
        assert sequences == list(range(1, len(sequences) + 1))  # no gap, no repeat
    assert host.running() == 0


@pytest.mark.django_db(transaction=True)
def test_a_hung_model_call_slows_no_other_run_and_a_cancel_ends_it_within_a_second(
        admin_user, tool_world, native_profile, anthropic_double):
    hung, release = threading.Event(), threading.Event()

    def never_answers(body):
        hung.set()
        release.wait(60)
        return text_reply("too late")

    anthropic_double.script(never_answers, *[text_reply(f"Answer {n}.") for n in range(5)])
    stuck = started(admin_user, native_profile, "hang")
    host = RunHost(capacity=10)
    try:
        stuck_run = host.start(stuck.pk, stuck.run_token)
        wait_until(hung.is_set, "the hung model call", 30)
        others = [started(admin_user, native_profile, f"quick #{n}") for n in range(5)]
        results = [host.start(c.pk, c.run_token) for c in others]
        # Each of the others completes while the stuck one still waits on its call.
        assert [future.result(60) for future in results] == ["end_turn"] * 5
        assert not stuck_run.done()
        services.request_cancel(Conversation.objects.get(pk=stuck.pk), user=admin_user)
        assert stuck_run.result(10) == "cancelled"
    finally:
        release.set()
    stuck.refresh_from_db()
    assert stuck.status == Conversation.Status.CANCELLED
    cancelled = [e.payload for e in stuck.events.order_by("sequence") if e.type == RunCancelled.type]
    assert len(cancelled) == 1 and cancelled[0]["stage"] == "model_call"


@pytest.mark.django_db(transaction=True)
def test_a_full_process_holds_the_next_run_until_one_ends(admin_user, tool_world, native_profile, anthropic_double):
    gate = threading.Event()

    def held(body):
        gate.wait(60)
        return text_reply("First.")

    anthropic_double.script(held, text_reply("Second."))
    first, second = started(admin_user, native_profile, "one"), started(admin_user, native_profile, "two")
    host = RunHost(capacity=1)
    first_run = host.start(first.pk, first.run_token)
    handed: list = []
    waiter = threading.Thread(target=lambda: handed.append(host.start(second.pk, second.run_token)), daemon=True)
    waiter.start()
    wait_until(lambda: len(anthropic_double.message_requests) == 1, "the first run's call", 30)
    assert not handed and Conversation.objects.get(pk=second.pk).heartbeat_at is None  # not claimed while full
    gate.set()
    assert first_run.result(30) == "end_turn"
    waiter.join(30)
    assert handed and handed[0].result(30) == "end_turn"
