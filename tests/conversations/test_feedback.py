"""Feedback on a conversation and its turns: kept and replaced per person and target, refused with a
reason when it cannot be kept, shown on the page, filtered on the list, and saved as tasks in one go."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from playground.agenteval.models import TaskSet
from playground.conversations import events as ev
from playground.conversations import feedback
from playground.conversations import services as conversation_services
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Feedback
from tests.agenteval.conftest import TIME, WEATHER


def finished(owner, text, tool):
    conversation = conversation_services.start_conversation(owner)
    record_event(conversation, ev.ChatMessage(role="user", text=text))
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="demo", model="demo", wire="native"))
    record_event(conversation, ev.ToolCall(tool_use_id="t", name=tool), turn_sequence=turn.sequence)
    record_event(conversation, ev.ToolResult(tool_use_id="t", name=tool), turn_sequence=turn.sequence,
                 status=Conversation.Status.IDLE)
    return conversation, turn.sequence


def role_client(django_user_model, name, role):
    user = django_user_model.objects.create_user(name, password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return user, client


def test_feedback_is_kept_replaced_and_withdrawn_per_person_and_target(admin_user, django_user_model):
    conversation, turn = finished(admin_user, "What time is it in Tokyo?", TIME)
    operator, _ = role_client(django_user_model, "olga", "operator")
    feedback.give_feedback(conversation, admin_user, rating=Feedback.Rating.GOOD)
    feedback.give_feedback(conversation, admin_user, rating=Feedback.Rating.BAD, comment="wrong city")  # replaces
    feedback.give_feedback(conversation, admin_user, turn_sequence=turn, comment="searched twice")
    feedback.give_feedback(conversation, operator, rating=Feedback.Rating.GOOD)  # anyone acting may, not only the owner
    rows = feedback.feedback_rows(conversation, admin_user)
    assert [(r.feedback.user.username, r.target, r.feedback.rating, r.feedback.comment, r.mine) for r in rows] == [
        ("alice", "the conversation", -1, "wrong city", True), ("olga", "the conversation", 1, "", False),
        ("alice", "turn 1", None, "searched twice", True)]
    assert feedback.withdraw_feedback(conversation, admin_user, turn) and not feedback.withdraw_feedback(conversation, admin_user, turn)


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({}, "Give a rating, a comment or both."),
    ({"rating": 5}, "The rating is good or bad."),
    ({"comment": "x" * 2001}, "The comment is too long (2001 characters; at most 2000)."),
    ({"rating": 1, "turn_sequence": 999}, "That turn is not part of this conversation."),
])
def test_feedback_that_cannot_be_kept_says_why(admin_user, kwargs, reason):
    conversation, _ = finished(admin_user, "What time is it in Tokyo?", TIME)
    with pytest.raises(feedback.FeedbackError) as refused:
        feedback.give_feedback(conversation, admin_user, **kwargs)
    assert str(refused.value) == reason and not Feedback.objects.exists()


def test_the_page_form_keeps_it_and_a_viewer_reads_it_without_a_form(admin_user, admin_client, django_user_model):
    conversation, turn = finished(admin_user, "What time is it in Tokyo?", TIME)
    url = reverse("conversations:feedback", args=[conversation.pk])
    response = admin_client.post(url, {"target": str(turn), "rating": "-1", "comment": "<b>slow</b>"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and 'data-testid="feedback-row" data-target="%d" data-rating="-1"' % turn in body
    assert "&lt;b&gt;slow&lt;/b&gt;" in body and "<b>slow</b>" not in body  # a comment is text, never markup
    refused = admin_client.post(url, {"target": "0", "rating": ""}, HTTP_HX_REQUEST="true").content.decode()
    assert "Give a rating, a comment or both." in refused and Feedback.objects.count() == 1
    bad_target = admin_client.post(url, {"target": "12345", "rating": "1"}, follow=True).content.decode()
    assert "Select a valid choice" in bad_target and Feedback.objects.count() == 1

    _, viewer = role_client(django_user_model, "vera", "viewer")
    page = viewer.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="feedback-row"' in page and 'data-testid="feedback-form"' not in page and "turn 1" in page
    assert viewer.post(url, {"target": "0", "rating": "1"}).status_code == 403
    shared = conversation_services  # the read-only share page never lists who said what
    assert shared and "feedback-row" not in admin_client.get(reverse("conversations:present", args=[conversation.pk])).content.decode()


def test_the_list_filters_by_feedback_and_shows_the_counts(admin_user, admin_client):
    good, _ = finished(admin_user, "What time is it in Tokyo?", TIME)
    bad, _ = finished(admin_user, "Weather forecast for Paris", WEATHER)
    finished(admin_user, "No feedback here", TIME)
    feedback.give_feedback(good, admin_user, rating=Feedback.Rating.GOOD)
    feedback.give_feedback(bad, admin_user, rating=Feedback.Rating.BAD, comment="wrong tool")
    listing = reverse("conversations:list")

    def shown(**query):
        page = admin_client.get(listing, query).content.decode()
        return {c.pk for c in Conversation.objects.all() if f'data-conversation="{c.pk}"' in page}

    assert shown(feedback="good") == {good.pk} and shown(feedback="bad") == {bad.pk} == shown(feedback="comment")
    assert shown(feedback="any") == {good.pk, bad.pk} and len(shown()) == 3
    assert "✓1" in admin_client.get(listing, {"feedback": "good"}).content.decode()
    assert "is not a feedback filter" in admin_client.get(listing, {"feedback": "nope"}).content.decode()


def test_save_selected_as_tasks_saves_what_it_can_and_says_why_not_the_rest(admin_user, admin_client, django_user_model, tool_world):
    good, _ = finished(admin_user, "What time is it in Tokyo?", TIME)
    also, _ = finished(admin_user, "Weather forecast for Paris", WEATHER)
    running = conversation_services.start_conversation(admin_user)
    record_event(running, ev.ChatMessage(role="user", text="still going"), status=Conversation.Status.RUNNING)
    operator, _ = role_client(django_user_model, "olga", "operator")
    theirs, _ = finished(operator, "Time in Lima?", TIME)
    response = admin_client.post(reverse("agenteval:save_conversations"),
                                 {"conversation": [good.pk, also.pk, running.pk], "task_set": "Thumbs up"}, follow=True)
    tasks = TaskSet.objects.get(name="Thumbs up").tasks.order_by("position")
    assert [(t.query, t.expected_tools, t.source_conversation_id) for t in tasks] == [
        ("What time is it in Tokyo?", [TIME], good.pk), ("Weather forecast for Paris", [WEATHER], also.pk)]
    body = response.content.decode()
    assert "Saved 2 tasks to Thumbs up." in body and f"#{running.pk}: The conversation is still running" in body

    _, operator_client = role_client(django_user_model, "omar", "operator")
    refused = operator_client.post(reverse("agenteval:save_conversations"), {"conversation": [theirs.pk]}, follow=True)
    assert "1 not saved (1 not yours to save)" in refused.content.decode() and not TaskSet.objects.filter(name="Saved conversations").exists()
    nothing = admin_client.post(reverse("agenteval:save_conversations"), {"task_set": "x"}, follow=True).content.decode()
    assert "Select at least one conversation to save." in nothing


def test_the_section_reads_the_turns_once(admin_user, django_assert_num_queries):
    conversation, turn = finished(admin_user, "What time is it in Tokyo?", TIME)
    feedback.give_feedback(conversation, admin_user, turn_sequence=turn, rating=Feedback.Rating.GOOD)
    with django_assert_num_queries(2):  # the turns, the feedback with its people
        context = feedback.feedback_context(conversation, admin_user)
    assert [row.target for row in context["rows"]] == ["turn 1"] and context["targets"][1] == (turn, "Turn 1")
