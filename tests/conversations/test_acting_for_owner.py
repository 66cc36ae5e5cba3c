"""An admin acting in someone else's conversation is recorded where the owner sees it; roles below
admin cannot reach others' conversations at all, and viewers have no conversations."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from playground.conversations import events as ev
from playground.conversations import services
from playground.conversations.events import record_event
from playground.conversations.models import Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    from playground.conversations import tasks

    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": None)


def _notices(conversation):
    return [e.payload for e in conversation.events.filter(type="acted_for_owner").order_by("sequence")]


def _client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_answering_sending_and_cancelling_is_recorded_for_the_owner(admin_user, viewer_user):
    admin_client, viewer_client = _client_of(admin_user), _client_of(viewer_user)
    conversation = services.start_conversation(viewer_user)
    prompt = record_event(conversation, ev.PermissionPrompt(tool_use_id="t1", name="echo"), status=Conversation.Status.WAITING)
    assert admin_client.post(reverse("conversations:answer", args=[conversation.pk]),
                             {"prompt": prompt.sequence, "choice": "deny"}).status_code == 302
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.IDLE)
    assert admin_client.post(reverse("conversations:send", args=[conversation.pk]), {"text": "carry on"}).status_code == 302
    assert admin_client.post(reverse("conversations:cancel", args=[conversation.pk])).status_code == 302
    notices = _notices(conversation)
    assert [(n["actor"], n["actor_role"], n["action"]) for n in notices] == [
        ("alice", "admin", "answered your permission prompt"),
        ("alice", "admin", "sent a message"),
        ("alice", "admin", "cancelled the run"),
    ]
    assert notices[0]["detail"] == f"#{prompt.sequence} echo: Deny"
    page = viewer_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="acted-for-owner"' in page and "alice</strong> (admin) answered your permission prompt" in page


def test_the_owner_acting_records_no_notice(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    assert viewer_client.post(reverse("conversations:send", args=[conversation.pk]), {"text": "hi"}).status_code == 302
    assert _notices(conversation) == []


def test_an_editor_watches_but_cannot_act_on_someone_elses_conversation(client, django_user_model, viewer_user):
    editor = django_user_model.objects.create_user("ed", is_staff=True)
    editor.groups.add(Group.objects.get(name="editor"))
    client.force_login(editor)
    conversation = services.start_conversation(viewer_user)
    assert client.get(reverse("conversations:detail", args=[conversation.pk])).status_code == 200
    assert client.post(reverse("conversations:send", args=[conversation.pk]), {"text": "x"}).status_code == 404
    assert _notices(conversation) == [] and not conversation.messages.exists()


def test_a_viewer_watches_conversations_but_starts_none(client, django_user_model, viewer_user):
    conversation = services.start_conversation(viewer_user, title="the demo")
    viewer = django_user_model.objects.create_user("vi")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    listing = client.get(reverse("conversations:list"))
    assert listing.status_code == 200 and "the demo" in listing.content.decode()
    assert 'data-testid="new-conversation-form"' not in listing.content.decode()
    assert client.get(reverse("conversations:detail", args=[conversation.pk])).status_code == 200
    assert client.post(reverse("conversations:new"), {"message": "hi"}).status_code == 403
    assert client.post(reverse("conversations:send", args=[conversation.pk]), {"text": "x"}).status_code == 403
    assert 'href="/conversations/"' in client.get(reverse("home")).content.decode()
