"""Conversation pages: list, new, detail, the POST fallbacks (send, answer, cancel) and compare."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from playground.conversations import events as ev
from playground.conversations import services
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Message
from tests.conversations.conftest import converse, make_profile

@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    from playground.conversations import tasks

    queued = []
    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": queued.append(pk))
    return queued


def test_the_list_shows_everyones_conversations_to_watch_and_the_demo_label(viewer_client, viewer_user, admin_user):
    mine = services.start_conversation(viewer_user, title="mine")
    theirs = services.start_conversation(admin_user, title="someone else's")
    response = viewer_client.get(reverse("conversations:list"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "mine" in body and "someone else" in body and "offline demo agent" in body
    assert f'data-conversation="{mine.pk}"' in body and f'data-conversation="{theirs.pk}"' in body


def test_it_needs_a_login(client):
    response = client.get(reverse("conversations:list"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_starting_a_conversation_with_a_first_message(viewer_client, viewer_user, no_queue, django_capture_on_commit_callbacks):
    profile = make_profile("on")
    with django_capture_on_commit_callbacks(execute=True):
        response = viewer_client.post(reverse("conversations:new"), {"profile": profile.pk, "provider": "demo", "message": "time in Tokyo?"})
    conversation = Conversation.objects.get(owner=viewer_user)
    assert response.status_code == 302 and response["Location"] == reverse("conversations:detail", args=[conversation.pk])
    assert conversation.profile_snapshot["name"] == "on" and conversation.provider == "demo"
    assert conversation.status == Conversation.Status.RUNNING and no_queue == [conversation.pk]


def test_the_profile_snapshot_keeps_history_when_the_profile_changes(viewer_user):
    profile = make_profile("mutable", wire_style="native")
    conversation = services.start_conversation(viewer_user, profile=profile)
    profile.wire_style = "client"
    profile.save()
    conversation.refresh_from_db()
    assert conversation.profile_snapshot["wire_style"] == "native"


def test_the_detail_page_renders_every_event_from_the_same_templates(admin_client, admin_user, tool_world, native_profile):
    from playground.conversations.providers.demo import DemoAgentProvider

    conversation, _ = converse(admin_user, "What time is it in Tokyo?", profile=native_profile, provider=DemoAgentProvider())
    response = admin_client.get(reverse("conversations:detail", args=[conversation.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    last = conversation.events.order_by("-sequence").first().sequence
    assert f'data-last-sequence="{last}"' in body and 'data-status="idle"' in body
    assert f'ws-connect="/ws/conversations/{conversation.pk}/"' in body
    for kind in ("turn_started", "toolsearch_query", "tool_call", "tool_result", "turn_finished", "message"):
        assert f'data-event-type="{kind}"' in body
    assert 'data-testid="chart-row"' in body and 'class="scorebar"' in body
    assert 'data-testid="offline-badge"' in body
    # Events of a turn are nested inside it.
    turn = conversation.events.filter(type="turn_started").first()
    assert f'id="turn-body-{conversation.pk}-{turn.sequence}"' in body


def test_the_header_names_the_wire_style_the_turns_went_out_in_live_and_on_reload(admin_client, admin_user, tool_world, settings):
    """A profile whose wire style is "server" talking to an OpenAI model runs OpenAI's hosted style:
    the header says so (from the saved turn event, as the turn lines do), not the profile's "server"."""
    from playground.conversations.fragments import render_event_frame
    from playground.conversations.selectors import panel_context

    settings.OPENAI_API_KEY = ""  # the demo agent on OpenAI's wire answers
    conversation = services.start_conversation(admin_user, profile=make_profile("openai-server", wire_style="server", provider="openai"))
    assert panel_context(conversation)["wire"] == {"style": "server", "source": "profile"}  # no turn yet
    conversation, _ = converse(admin_user, "What time is it in Tokyo?", conversation=conversation)

    header = f'id="wire-style-{conversation.pk}" data-testid="header-wire-style" data-wire-style="openai-hosted" data-source="turn"'
    body = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert header in body and "wire style <strong>openai-hosted</strong>" in body
    assert "wire style <strong>server</strong>" not in body
    turn = conversation.events.filter(type="turn_started").first()
    assert turn.payload["wire"] == "openai-hosted"
    frame = render_event_frame(conversation, turn)  # what a watcher's page receives as the turn starts
    assert header + ' hx-swap-oob="outerHTML"' in frame


def test_other_peoples_conversations_are_watched_read_only(viewer_client, viewer_user, admin_user):
    conversation = services.start_conversation(admin_user)
    page = viewer_client.get(reverse("conversations:detail", args=[conversation.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "data-watch-only" in body and 'data-testid="watch-only-note"' in body
    assert f'ws-connect="/ws/conversations/{conversation.pk}/"' in body  # it updates live
    for name, data in (("send", {"text": "hi"}), ("cancel", {}), ("answer", {"prompt": 1, "choice": "once"})):
        assert viewer_client.post(reverse(f"conversations:{name}", args=[conversation.pk]), data).status_code == 404
    assert not Message.objects.filter(conversation=conversation).exists()
    own = services.start_conversation(viewer_user)
    assert "data-watch-only" not in viewer_client.get(reverse("conversations:detail", args=[own.pk])).content.decode()


def test_staff_may_look_at_anyones_conversation(admin_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    assert admin_client.get(reverse("conversations:detail", args=[conversation.pk])).status_code == 200


def test_send_fallback_stores_the_message_and_refuses_while_running(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    url = reverse("conversations:send", args=[conversation.pk])
    assert viewer_client.post(url, {"text": "hello"}).status_code == 302
    assert Message.objects.get(conversation=conversation).content == [{"type": "text", "text": "hello"}]
    response = viewer_client.post(url, {"text": "again"}, follow=True)
    assert "still working" in response.content.decode()
    assert Message.objects.filter(conversation=conversation).count() == 1
    refused = viewer_client.post(url, {"text": "again"}, headers={"HX-Request": "true"})
    assert refused.status_code == 409 and "still working" in refused.content.decode()
    assert Message.objects.filter(conversation=conversation).count() == 1
    assert viewer_client.post(url, {"text": "   "}, follow=True).status_code == 200


def test_the_prompt_says_always_lasts_for_this_conversation_only(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    record_event(conversation, ev.PermissionPrompt(tool_use_id="t1", name="echo", reason="rule 'ask echo'"),
                 status=Conversation.Status.WAITING)
    page = viewer_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert "Always allow in this conversation" in page
    assert "lasts for this conversation only; a permission rule makes it permanent" in page


def test_answer_fallback_records_the_choice(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    prompt = record_event(conversation, ev.PermissionPrompt(tool_use_id="t1", name="echo", reason="rule 'ask echo'"),
                          status=Conversation.Status.WAITING)
    response = viewer_client.post(reverse("conversations:answer", args=[conversation.pk]), {"prompt": prompt.sequence, "choice": "always"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    answer = conversation.events.get(type="permission_answer")
    assert answer.payload["choice"] == "always" and answer.payload["answered_by"] == "bob"
    assert conversation.always_allowed == ["echo"] and conversation.status == Conversation.Status.RUNNING
    bad = viewer_client.post(reverse("conversations:answer", args=[conversation.pk]), {"prompt": 999, "choice": "once"}, follow=True)
    assert "no permission prompt #999" in bad.content.decode()
    again = viewer_client.post(reverse("conversations:answer", args=[conversation.pk]), {"prompt": prompt.sequence, "choice": "deny"},
                               headers={"HX-Request": "true"})
    assert again.status_code == 409 and "already been answered" in again.content.decode()


def test_cancel_fallback_marks_a_running_conversation(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)
    services.send_message(conversation, "hi", user=viewer_user, enqueue=False)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now())  # a worker has it
    assert viewer_client.post(reverse("conversations:cancel", args=[conversation.pk])).status_code == 302
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLING
    assert conversation.events.filter(type="status", payload__status="cancelling").exists()


def test_a_cancel_after_the_run_finished_says_so(viewer_client, viewer_user):
    conversation = services.start_conversation(viewer_user)  # idle: its last answer is in
    url = reverse("conversations:cancel", args=[conversation.pk])
    page = viewer_client.post(url, follow=True).content.decode()
    assert "already finished before your cancel arrived" in page
    fragment = viewer_client.post(url, headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and 'data-kind="info"' in fragment.content.decode()
    assert "nothing was cancelled" in fragment.content.decode()
    assert not conversation.events.filter(type="cancelled").exists()


def test_compare_runs_one_message_under_two_profiles(admin_client, admin_user, no_queue, django_capture_on_commit_callbacks):
    off, on = make_profile("Tool search off", tool_search_mode="false"), make_profile("Tool search on")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("conversations:compare"),
                                     {"profile_a": off.pk, "profile_b": on.pk, "provider": "demo", "message": "time in Tokyo?"})
    pair = list(Conversation.objects.filter(owner=admin_user).order_by("pk"))
    assert len(pair) == 2 and pair[0].compare_group == pair[1].compare_group != ""
    assert response["Location"] == reverse("conversations:compare_view", args=[pair[0].compare_group])
    assert sorted(no_queue) == [c.pk for c in pair]
    page = admin_client.get(response["Location"]).content.decode()
    assert page.count('data-testid="conversation"') == 2 and 'data-testid="token-difference"' in page
    for conversation in pair:
        assert f'ws-connect="/ws/conversations/{conversation.pk}/"' in page


def test_compare_defaults_to_tool_search_off_against_on(admin_client):
    # Before: both sides defaulted to "Default settings", so a first comparison compared nothing.
    from playground.registry.models import AgentProfile

    make_profile("Client-side", wire_style=AgentProfile.WireStyle.CLIENT)  # first by name, but behind a gateway
    make_profile("Tool search budgeted", announcement_layout=AgentProfile.Layout.BUDGETED)  # before "on", but tuned
    on, off = make_profile("Tool search on"), make_profile("Tool search off", tool_search_mode="false")
    page = admin_client.get(reverse("conversations:compare")).content.decode()
    left, right = page.split('name="profile_a"')[1].split("</select>")[0], page.split('name="profile_b"')[1].split("</select>")[0]
    assert f'<option value="{off.pk}" selected>' in left and f'<option value="{on.pk}" selected>' in right


def test_an_unreachable_broker_fails_the_conversation_with_a_clear_error(viewer_client, viewer_user, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    from playground.conversations import tasks

    def broker_down(pk, run_token=""):
        raise ConnectionRefusedError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.run_conversation_task, "delay", broker_down)
    conversation = services.start_conversation(viewer_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = viewer_client.post(reverse("conversations:send", args=[conversation.pk]), {"text": "hello"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED
    error = conversation.events.get(type="error").payload
    assert error["kind"] == "queue" and "is Redis running?" in error["message"]


def test_a_cancel_frees_at_once_a_run_no_worker_took_and_its_late_task_does_nothing(viewer_client, viewer_user):
    # A message whose task the broker lost (a Redis restart) or that still waits in the queue.
    from playground.conversations.tasks import run_conversation_task

    conversation = services.start_conversation(viewer_user)
    services.send_message(conversation, "hi", user=viewer_user, enqueue=False)
    token = Conversation.objects.get(pk=conversation.pk).run_token
    viewer_client.post(reverse("conversations:cancel", args=[conversation.pk]))
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED and conversation.run_token == ""
    cancelled = conversation.events.get(type="cancelled").payload
    assert cancelled["stage"] == "queued" and cancelled["requested_by"] == viewer_user.username
    assert run_conversation_task(conversation.pk, token) == "superseded"  # delivered late: it writes nothing
    assert conversation.events.order_by("-sequence").first().type == "turn_finished"


def test_a_second_cancel_frees_a_claimed_run_whose_worker_never_answered(viewer_client, viewer_user, settings):
    conversation = services.start_conversation(viewer_user)
    services.send_message(conversation, "hi", user=viewer_user, enqueue=False)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=timezone.now())  # a worker took it
    url = reverse("conversations:cancel", args=[conversation.pk])
    viewer_client.post(url)
    viewer_client.post(url)  # the worker may still be busy: nothing changes yet
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLING
    # Its heartbeat stops: the worker is lost, and the next cancel frees the conversation.
    Conversation.objects.filter(pk=conversation.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.AGENT_LOST_SECONDS + 1))
    viewer_client.post(url)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED
