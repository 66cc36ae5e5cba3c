"""The "Replay with…" page (replay_views.replay): who may replay, what it starts, and bad input refused
with the reason (an unknown profile, a turn out of range, an origin still running), never a 500."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from playground.conversations import services
from playground.conversations.events import ChatMessage, record_event
from playground.conversations.models import Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_keys_no_queue(settings, monkeypatch):
    from playground.conversations import tasks

    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""
    queued: list[int] = []
    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": queued.append(pk))
    return queued


def person(django_user_model, name: str, role: str):
    user = django_user_model.objects.create_user(name)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def origin(admin_user, native_profile):
    """A finished conversation of the admin's with two messages of the person's."""
    conversation = services.start_conversation(admin_user, profile=native_profile, title="two questions")
    for text in ("What time is it in Tokyo?", "And in Paris?"):
        record_event(conversation, ChatMessage(role="user", text=text, author="alice"))
    return conversation


def test_an_operator_replays_someone_elses_conversation_and_lands_beside_it(client, django_user_model, origin, client_profile,
                                                                            no_keys_no_queue, django_capture_on_commit_callbacks):
    client.force_login(person(django_user_model, "olga", "operator"))
    page = client.get(reverse("conversations:replay", args=[origin.pk]) + "?through=1").content.decode()
    assert "1 through 2: … “And in Paris?”" in page and "1 only: “What time is it in Tokyo?”" in page
    assert 'value="1" selected' in page  # "replay from here" links name the turn
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("conversations:replay", args=[origin.pk]),
                               {"profile": client_profile.pk, "provider": "demo", "search_backend": "bm25", "through": 2})
    replay = Conversation.objects.get(replay_of=origin)
    assert response.status_code == 302 and response["Location"] == reverse("conversations:replay_view", args=[replay.pk])
    assert replay.owner.username == "olga" and replay.provider == "demo"
    assert replay.profile_snapshot["name"] == "client" and replay.profile_snapshot["search_backend"] == "bm25"
    assert replay.replay_plan["messages"] == ["What time is it in Tokyo?", "And in Paris?"] and replay.replay_plan["sent"] == 1
    assert no_keys_no_queue == [replay.pk]  # the first message went to a worker; the next follows its answer
    assert list(replay.events.filter(type="message").values_list("payload__text", flat=True)) == ["What time is it in Tokyo?"]


def test_another_vendors_wire_runs_on_that_vendors_provider(admin_client, origin, native_profile):
    response = admin_client.post(reverse("conversations:replay", args=[origin.pk]),
                                 {"profile": native_profile.pk, "wire": "openai-client", "provider": "=origin", "through": 1})
    replay = Conversation.objects.get(replay_of=origin)
    assert response.status_code == 302
    # No OpenAI key here: the offline demo agent on OpenAI's wire, the profile's native style as OpenAI's client search.
    assert replay.provider == "demo-openai" and replay.profile_snapshot["wire_style"] == "native"


@pytest.mark.parametrize("fields, reason", [
    ({"profile": 999999}, "There is no agent profile 999999."),
    ({"through": 3}, "Turn 3 is out of range."),
    ({"through": "x"}, "Turn x is out of range."),
    ({"search_backend": "nope"}, "nope is not a search backend."),
    ({"provider": "nope"}, "nope is not a provider."),
])
def test_bad_input_is_refused_with_the_reason(admin_client, origin, fields, reason):
    response = admin_client.post(reverse("conversations:replay", args=[origin.pk]), {"through": 1, "provider": "=origin", **fields})
    assert response.status_code == 400 and reason in response.content.decode()
    assert not Conversation.objects.filter(replay_of=origin).exists()


def test_an_origin_still_running_is_refused(admin_client, origin):
    Conversation.objects.filter(pk=origin.pk).update(status=Conversation.Status.WAITING)
    page = admin_client.get(reverse("conversations:replay", args=[origin.pk])).content.decode()
    assert 'data-testid="replay-origin-running"' in page
    response = admin_client.post(reverse("conversations:replay", args=[origin.pk]), {"through": 2, "provider": "=origin"})
    assert response.status_code == 400 and "is still running (waiting for permission): replay it once its run has ended" in response.content.decode()
    assert not Conversation.objects.filter(replay_of=origin).exists()


def test_a_viewer_sees_no_replay_button_and_cannot_replay(client, django_user_model, origin):
    client.force_login(person(django_user_model, "vera", "viewer"))
    page = client.get(reverse("conversations:detail", args=[origin.pk])).content.decode()
    assert 'data-testid="replay-link"' not in page
    assert client.get(reverse("conversations:replay", args=[origin.pk])).status_code == 403
    assert client.post(reverse("conversations:replay", args=[origin.pk]), {"through": 1}).status_code == 403
    assert not Conversation.objects.filter(replay_of=origin).exists()


def test_an_operator_sees_the_replay_button(client, django_user_model, origin):
    client.force_login(person(django_user_model, "olga", "operator"))
    page = client.get(reverse("conversations:detail", args=[origin.pk])).content.decode()
    assert f'href="{reverse("conversations:replay", args=[origin.pk])}" data-testid="replay-link"' in page


def test_a_conversation_with_nothing_to_replay_says_so(admin_client, admin_user):
    empty = services.start_conversation(admin_user)
    response = admin_client.post(reverse("conversations:replay", args=[empty.pk]), {"provider": "=origin"})
    assert response.status_code == 400 and f"Conversation #{empty.pk} has no message of the person&#x27;s to re-send." in response.content.decode()
