"""A run goes on after a worker dies: the conversation it held is released by the conversations' lease
and the task goes on in that conversation from what it stored (at most AGENT_QUEUE_ATTEMPTS times,
then it ends worker_lost), and no task is started or continued twice — whichever caller advances the
run (a conversation's end, the run's task, every worker's watch)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from playground import lost_tasks
from playground.agenteval import selectors, services
from playground.agenteval import tasks as agenteval_tasks  # what a worker imports: registers the sweep
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.conversations import runs as conversation_runs
from playground.conversations import services as conversation_services
from playground.conversations.models import Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_queue(monkeypatch):
    monkeypatch.setattr(services, "queue_advance", lambda run_id: None)
    monkeypatch.setattr(conversation_runs, "queue_run", lambda *args, **kwargs: None)


def worker_dies(conversation_id: int, settings) -> None:
    """A worker claimed the conversation, then died: its heartbeat stops."""
    Conversation.objects.filter(pk=conversation_id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.AGENT_LOST_SECONDS * 2))


def test_a_dead_workers_task_goes_on_in_its_conversation_then_the_run_goes_on(tool_world, claude_profiles, no_queue,
                                                                              admin_user, settings):
    settings.AGENT_QUEUE_ATTEMPTS = 2
    task_set = TaskSet.objects.create(name="two", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it in Tokyo?", expected_tools=["mcp__time__get_current_time"])
    task_set.tasks.create(external_id="b", query="Weather forecast for Paris", expected_tools=["mcp__weather__get_forecast"])
    run = services.start_run(task_set, [claude_profiles[0]], concurrency=1, user=admin_user)

    services.advance(run.pk)
    services.advance(run.pk)  # a second caller at once: the concurrency holds, nothing starts twice
    first = run.items.get(status=TaskRunItem.Status.RUNNING)
    assert run.items.filter(status=TaskRunItem.Status.PENDING).count() == 1
    token = Conversation.objects.get(pk=first.conversation_id).run_token

    for attempt in (1, 2):
        worker_dies(first.conversation_id, settings)
        assert lost_tasks.SWEEPS["task runs"] is agenteval_tasks.RUNS  # every worker's watch runs it each round
        lost_tasks.run_sweeps([agenteval_tasks.RUNS])
        # Released, then handed to a worker again in the same conversation, under a new run token.
        conversation = Conversation.objects.get(pk=first.conversation_id)
        assert conversation.status == Conversation.Status.RUNNING and conversation.run_token not in ("", token)
        token = conversation.run_token
        assert run.items.get(pk=first.pk).status == TaskRunItem.Status.RUNNING
        assert run.items.filter(status=TaskRunItem.Status.PENDING).count() == 1  # its place is still taken
        notes = [e.payload["note"] for e in conversation.events.filter(type="status") if "task run" in e.payload.get("note", "")]
        assert len(notes) == attempt and f"({attempt} of 2)" in notes[-1]
        services.advance(run.pk)  # advancing again does not continue it twice
        assert Conversation.objects.get(pk=first.conversation_id).run_token == token

    worker_dies(first.conversation_id, settings)  # a third time: its re-sends are used up
    lost_tasks.run_sweeps([agenteval_tasks.RUNS])
    first.refresh_from_db()
    assert first.status == TaskRunItem.Status.DONE and first.measures["errors"] == {"worker_lost": 1}
    assert first.measures["resumed"] == 2 and first.measures["success"] is False
    second = run.items.get(status=TaskRunItem.Status.RUNNING)
    assert second.task.external_id == "b" and second.conversation_id != first.conversation_id

    services.advance(run.pk)
    assert run.items.get(pk=second.pk).conversation_id == second.conversation_id  # still the one conversation
    assert Conversation.objects.count() == 2
    Conversation.objects.filter(pk=second.conversation_id).update(status=Conversation.Status.IDLE)
    services.advance(run.pk)
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.DONE


def test_an_answer_stored_before_the_worker_died_ends_the_task_without_asking_again(tool_world, claude_profiles,
                                                                                    no_queue, admin_user, settings):
    task_set = TaskSet.objects.create(name="one", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it in Tokyo?", expected_tools=["mcp__time__get_current_time"])
    run = services.start_run(task_set, [claude_profiles[0]], user=admin_user)
    services.advance(run.pk)
    item = run.items.get()
    # The model's final answer was stored, then the worker died before it recorded the run's end.
    item.conversation.messages.create(position=2, role="assistant", content=[{"type": "text", "text": "It is 9 pm."}])
    worker_dies(item.conversation_id, settings)
    requeued = []
    conversation_runs.queue_run = lambda *args, **kwargs: requeued.append(args)  # no_queue's double, watched
    services.advance(run.pk)
    item.refresh_from_db()
    assert item.status == TaskRunItem.Status.DONE and not requeued
    assert item.measures["resumed"] == 1 and item.measures["errors"] == {} and item.measures["end_reason"] == "end_turn"
    assert Conversation.objects.get(pk=item.conversation_id).status == Conversation.Status.IDLE


def test_a_cancelled_runs_dead_worker_is_not_continued(tool_world, claude_profiles, no_queue, admin_user, settings):
    task_set = TaskSet.objects.create(name="one", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it in Tokyo?", expected_tools=["mcp__time__get_current_time"])
    run = services.start_run(task_set, [claude_profiles[0]], user=admin_user)
    services.advance(run.pk)
    item = run.items.get()
    Conversation.objects.filter(pk=item.conversation_id).update(heartbeat_at=timezone.now())  # claimed by a worker
    assert services.cancel_run(run)
    worker_dies(item.conversation_id, settings)
    services.advance(run.pk)
    item.refresh_from_db()
    assert item.status == TaskRunItem.Status.CANCELLED
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.CANCELLED


def test_a_conversation_a_person_cancelled_is_not_a_completed_task(tool_world, claude_profiles, no_queue, admin_user):
    task_set = TaskSet.objects.create(name="one", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it in Tokyo?", expected_tools=["mcp__time__get_current_time"])
    run = services.start_run(task_set, [claude_profiles[0]], user=admin_user)
    services.advance(run.pk)
    item = run.items.get()
    assert conversation_services.request_cancel(item.conversation, user=admin_user)  # queued, no worker: ends at once
    services.advance(run.pk)
    item.refresh_from_db()
    assert item.status == TaskRunItem.Status.CANCELLED and item.measures["errors"] == {"cancelled": 1}
    row = selectors.report(TaskRun.objects.get(pk=run.pk))["profiles"][0]
    assert (row["tasks"], row["completed"], row["success"]) == (1, 0, 0.0)


def test_the_quick_step_starts_the_next_task_and_leaves_the_measures_to_a_full_step(tool_world, claude_profiles,
                                                                                    no_queue, admin_user):
    task_set = TaskSet.objects.create(name="two", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it in Tokyo?", expected_tools=["mcp__time__get_current_time"])
    task_set.tasks.create(external_id="b", query="Weather forecast for Paris", expected_tools=["mcp__weather__get_forecast"])
    run = services.start_run(task_set, [claude_profiles[0]], concurrency=1, user=admin_user)
    services.advance(run.pk)
    first = run.items.get(status=TaskRunItem.Status.RUNNING)
    Conversation.objects.filter(pk=first.conversation_id).update(status=Conversation.Status.IDLE)

    services.advance_run_of_conversation(first.conversation_id, measure=False)
    first.refresh_from_db()
    assert first.status == TaskRunItem.Status.RUNNING and first.measures is None  # its measures wait
    second = run.items.get(task__external_id="b")
    assert second.status == TaskRunItem.Status.RUNNING and second.conversation_id  # its place went to the next task
    Conversation.objects.filter(pk=second.conversation_id).update(status=Conversation.Status.IDLE)
    services.advance(run.pk, measure=False)
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.RUNNING  # not ended with measures missing

    services.advance(run.pk)  # the full step (the worker's measuring thread, or the round)
    assert {i.status for i in run.items.all()} == {TaskRunItem.Status.DONE}
    assert all(i.measures is not None for i in run.items.all())
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.DONE
