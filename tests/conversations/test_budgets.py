"""Budgets per user and per profile: spent as the overview counts it, new work refused at the limit with
the reason (conversations, messages, compares, task runs), a running run never cut, the admins' alert."""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from playground.agenteval import services as task_runs
from playground.agenteval.models import TaskSet
from playground.conversations import budgets, services
from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event, UsageBudget
from playground.registry.models import AgentProfile

SONNET = "claude-sonnet-4-5"  # $3 in, $15 out per million (the dated defaults)


def spend(conversation, *, input_tokens, output_tokens, at=None):
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="anthropic", model=SONNET, wire="native"))
    response = record_event(conversation, ev.ModelResponse(stop_reason="end_turn", duration_ms=5, model=SONNET,
                                                           usage={"input": input_tokens, "output": output_tokens}),
                            turn_sequence=turn.sequence)
    if at is not None:
        Event.objects.filter(pk__in=[turn.pk, response.pk]).update(created_at=at)


@pytest.fixture(autouse=True)
def fresh_alerts():
    budgets.forget_alerts()
    yield
    budgets.forget_alerts()


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    return user


@pytest.fixture
def profile(db):
    return AgentProfile.objects.create(name="Budgeted", tool_search_mode="true")


def test_spent_is_what_the_overview_counts_today(operator, profile):
    budget = UsageBudget.objects.create(user=operator, metric="dollars", period="day", limit=Decimal("1"))
    conversation = Conversation.objects.create(owner=operator, profile=profile)
    spend(conversation, input_tokens=100_000, output_tokens=10_000)  # $0.30 + $0.15
    spend(conversation, input_tokens=10**6, output_tokens=0, at=timezone.now() - timedelta(days=2))  # before today
    status = budgets.status_of(budget)
    assert status.spent == Decimal("0.45") and not status.reached and status.share == pytest.approx(0.45)
    tokens = budgets.status_of(UsageBudget.objects.create(profile=profile, metric="tokens", period="month", limit=10))
    assert tokens.spent >= 110_000 and tokens.reached and tokens.spent_label.endswith("tokens")


def test_new_conversations_and_messages_are_refused_at_the_limit_and_a_run_is_not_cut(operator, profile):
    conversation = services.start_conversation(operator, profile=profile)
    spend(conversation, input_tokens=200_000, output_tokens=0)  # $0.60
    UsageBudget.objects.create(user=operator, metric="dollars", period="day", limit=Decimal("0.5"))
    with pytest.raises(services.ConversationError, match=r"daily budget of user olga is reached: \$0\.6000 spent today of \$0\.5000"):
        services.start_conversation(operator, profile=profile)
    with pytest.raises(services.ConversationError, match="budget of user olga is reached"):
        services.send_message(conversation, "one more", enqueue=False)
    assert Conversation.objects.filter(owner=operator).count() == 1 and not conversation.messages.exists()
    # Another user under the same profile is not limited by olga's budget.
    other = type(operator).objects.create_user("petra", password="pw")
    assert services.start_conversation(other, profile=profile).kind == Conversation.Kind.INTERACTIVE


def test_a_profile_budget_refuses_everyone_under_it(operator, profile, admin_user):
    spend(Conversation.objects.create(owner=admin_user, profile=profile), input_tokens=0, output_tokens=100)
    UsageBudget.objects.create(profile=profile, metric="tokens", period="month", limit=100)
    with pytest.raises(services.ConversationError, match="monthly budget of profile Budgeted is reached: 100 tokens"):
        services.start_conversation(operator, profile=profile)
    assert services.start_conversation(operator, profile=None).pk  # the default settings are not that profile


def test_a_task_run_is_refused_at_start_and_its_conversations_are_not_checked_one_by_one(operator, profile, admin_user):
    task_set = TaskSet.objects.create(name="one", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="a", query="What time is it?", expected_tools=[])
    spend(Conversation.objects.create(owner=admin_user, profile=profile), input_tokens=0, output_tokens=100)
    budget = UsageBudget.objects.create(profile=profile, metric="tokens", period="day", limit=100)
    with pytest.raises(task_runs.TaskRunError, match="daily budget of profile Budgeted is reached"):
        task_runs.start_run(task_set, [profile], user=operator)
    # A task run's own conversation (its run already started) is not refused mid-run.
    assert services.start_conversation(operator, profile=profile, kind=Conversation.Kind.TASK_RUN).kind == "task_run"
    budget.delete()


def test_the_new_conversation_page_says_why_instead_of_failing(operator, profile):
    spend(Conversation.objects.create(owner=operator, profile=profile), input_tokens=0, output_tokens=10)
    UsageBudget.objects.create(user=operator, metric="tokens", period="day", limit=5)
    client = Client()
    client.force_login(operator)
    response = client.post(reverse("conversations:new"), {"profile": profile.pk, "provider": "", "message": "hi"})
    assert response.status_code == 200 and "budget of user olga is reached" in response.content.decode()
    assert Conversation.objects.filter(owner=operator).count() == 1


def test_admins_add_and_remove_budgets_and_see_the_alert(admin_client, operator, profile):
    url = reverse("conversations:overview")
    assert 'data-testid="budget-alert"' not in admin_client.get(url).content.decode()
    response = admin_client.post(reverse("conversations:budget_add"),
                                 {"profile": profile.pk, "metric": "tokens", "period": "day", "limit": "5"})
    assert response.status_code == 302
    budget = UsageBudget.objects.get()
    spend(Conversation.objects.create(owner=operator, profile=profile), input_tokens=3, output_tokens=3)
    budgets.forget_alerts()
    page = admin_client.get(url).content.decode()
    assert 'data-testid="budget-alert"' in page and 'data-reached="true"' in page and "6 tokens" in page
    bad = admin_client.post(reverse("conversations:budget_add"),
                            {"profile": profile.pk, "user": operator.pk, "metric": "tokens", "period": "day", "limit": "5"},
                            follow=True)
    assert "choose exactly one" in bad.content.decode() and UsageBudget.objects.count() == 1
    admin_client.post(reverse("conversations:budget_delete", args=[budget.pk]))
    assert not UsageBudget.objects.exists()
    assert 'data-testid="budget-alert"' not in admin_client.get(url).content.decode()


def test_only_admins_set_budgets_and_a_user_sees_only_their_own(operator, profile, admin_user):
    UsageBudget.objects.create(user=admin_user, metric="dollars", period="day", limit=Decimal("9"))
    UsageBudget.objects.create(profile=profile, metric="dollars", period="day", limit=Decimal("3"))
    client = Client()
    client.force_login(operator)
    page = client.get(reverse("conversations:overview")).content.decode()
    assert 'data-scope="profile Budgeted"' in page and "user alice" not in page and 'data-testid="budget-form"' not in page
    response = client.post(reverse("conversations:budget_add"), {"user": operator.pk, "metric": "tokens", "period": "day",
                                                                 "limit": "1"})
    assert response.status_code == 403 and UsageBudget.objects.count() == 2


def test_a_replay_is_new_work_refused_with_the_reason_and_otherwise_marked_as_a_replay(operator, profile):
    from playground.conversations import replays

    origin = services.start_conversation(operator, profile=profile)
    record_event(origin, ev.ChatMessage(role="user", text="What time is it?"), status=Conversation.Status.IDLE)
    UsageBudget.objects.create(user=operator, metric="tokens", period="day", limit=10)
    spend(origin, input_tokens=10, output_tokens=0)
    with pytest.raises(replays.ReplayError, match="daily budget of user olga is reached"):  # the form shows it: no 500
        replays.start_replay(origin, operator, replays.ReplayChoice(profile=profile))
    UsageBudget.objects.all().delete()
    replay = replays.start_replay(origin, operator, replays.ReplayChoice(profile=profile))
    assert replay.kind == Conversation.Kind.REPLAY and replay.replay_of_id == origin.pk


def test_every_budgets_status_in_a_few_grouped_reads_agreeing_with_each_alone(operator, profile, admin_user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    other = AgentProfile.objects.create(name="Other")
    spend(Conversation.objects.create(owner=operator, profile=profile), input_tokens=100_000, output_tokens=0)
    spend(Conversation.objects.create(owner=admin_user, profile=other), input_tokens=0, output_tokens=7)
    made = [UsageBudget.objects.create(user=operator, metric="dollars", period="day", limit=Decimal("1")),
            UsageBudget.objects.create(user=admin_user, metric="tokens", period="month", limit=5),
            UsageBudget.objects.create(profile=profile, metric="tokens", period="day", limit=10**6),
            UsageBudget.objects.create(profile=other, metric="tokens", period="day", limit=10**6)]
    with CaptureQueriesContext(connection) as four:
        budgets.statuses()
    for _ in range(6):  # more budgets of the same periods and scopes add no read
        made.append(UsageBudget.objects.create(profile=profile, metric="dollars", period="day", limit=Decimal("9")))
    with CaptureQueriesContext(connection) as ten:
        together = budgets.statuses()
    # The budgets, then one grouped read per (period, scope) present: 3 here, each in its own atomic block.
    assert len(ten.captured_queries) == len(four.captured_queries) <= 1 + 3 * 4
    alone = [budgets.status_of(budget) for budget in made]
    assert [(s.budget.pk, s.spent) for s in together] == [(s.budget.pk, s.spent) for s in alone]
    assert [s.spent for s in together[:4]] == [Decimal("0.3"), Decimal(7), Decimal(100_000), Decimal(7)]
