"""The conversation socket: authorisation, replay from a last sequence, live frames, actions."""
from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from playground.conversations import events as ev
from playground.conversations import services
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event, Message
from playground.conversations.routing import websocket_urlpatterns

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
FRAME = re.compile(r'data-frame-sequence="(\d+)"')


def frame_sequence(frame: str) -> int:
    return int(FRAME.search(frame).group(1))


async def connect_as(user, conversation_id: int) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def receive_frames(communicator, count: int) -> list[str]:
    return [await communicator.receive_from(timeout=5) for _ in range(count)]


@database_sync_to_async
def conversation_with_events(owner, count: int) -> Conversation:
    conversation = Conversation.objects.create(owner=owner)
    for i in range(count):
        record_event(conversation, ev.ChatMessage(role="user", text=f"message {i + 1}"))
    return conversation


async def test_the_owner_gets_every_event_in_order_after_hello(redis, admin_user):
    conversation = await conversation_with_events(admin_user, 3)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    frames = await receive_frames(communicator, 3)
    assert [frame_sequence(f) for f in frames] == [1, 2, 3]
    assert 'data-event-type="message"' in frames[0] and "message 1" in frames[0]
    assert f'id="chat-{conversation.pk}" hx-swap-oob="beforeend"' in frames[0]
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_a_reconnect_gets_only_what_it_missed(redis, admin_user):
    conversation = await conversation_with_events(admin_user, 4)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 2}))
    assert [frame_sequence(f) for f in await receive_frames(communicator, 2)] == [3, 4]
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_live_events_arrive_once_saved_and_never_twice(redis, admin_user):
    conversation = await conversation_with_events(admin_user, 1)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 1}))
    assert await communicator.receive_nothing(timeout=0.2)
    await database_sync_to_async(record_event)(conversation.pk, ev.TurnStarted(
        turn=1, provider="demo", model="m", wire="native", loaded_tools=["echo"], deferred_tools=["mcp__a__b"],
        tokens={"sent_tokens": 50, "baseline_tokens": 200}))
    frame = await communicator.receive_from(timeout=5)
    assert frame_sequence(frame) == 2 and 'data-event-type="turn_started"' in frame
    assert f'id="timeline-{conversation.pk}" hx-swap-oob="beforeend"' in frame
    assert f'id="chart-{conversation.pk}"' in frame and 'data-tokens-sent="50"' in frame
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_anyone_with_a_role_watches_but_only_the_owner_or_staff_act(redis, admin_user, viewer_user, django_user_model):
    from django.contrib.auth.models import Group

    conversation = await conversation_with_events(viewer_user, 1)
    watcher = await database_sync_to_async(django_user_model.objects.create_user)("carol", "c@example.com", "pw-carol-123")
    await database_sync_to_async(lambda: watcher.groups.add(Group.objects.get(name="viewer")))()
    watching = await connect_as(watcher, conversation.pk)
    await watching.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    assert frame_sequence(await watching.receive_from(timeout=5)) == 1
    for action in ({"action": "send", "text": "hi"}, {"action": "cancel"}, {"action": "answer", "prompt": 1, "choice": "once"}):
        await watching.send_to(text_data=json.dumps(action))
        assert "only its owner or an admin can send, answer or cancel" in await watching.receive_from(timeout=5)
    assert not await database_sync_to_async(Message.objects.filter(conversation=conversation).exists)()
    await watching.disconnect()
    inactive = await database_sync_to_async(django_user_model.objects.create_user)("dan", "d@example.com", "pw-dan-12345", is_active=False)
    refused = await connect_as(inactive, conversation.pk)
    assert (await refused.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4403}
    staff = await connect_as(admin_user, conversation.pk)
    await staff.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    assert frame_sequence(await staff.receive_from(timeout=5)) == 1
    await staff.disconnect()


async def test_through_the_real_stack_anonymous_users_are_refused_and_bad_origins_rejected(redis, admin_user, client):
    from playground.asgi import application

    conversation = await conversation_with_events(admin_user, 1)
    path = f"/ws/conversations/{conversation.pk}/"
    anonymous = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost"), (b"host", b"localhost")])
    connected, _ = await anonymous.connect(timeout=10)
    assert connected and (await anonymous.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}

    await database_sync_to_async(client.force_login)(admin_user)
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}".encode()
    foreign = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)])
    connected, _ = await foreign.connect(timeout=10)
    assert not connected

    owner = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)])
    connected, _ = await owner.connect(timeout=10)
    assert connected
    await owner.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    assert frame_sequence(await owner.receive_from(timeout=5)) == 1
    await owner.disconnect()


async def test_messages_answers_and_cancel_go_through_the_socket(redis, admin_user, monkeypatch):
    from playground.conversations import tasks

    queued = []
    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": queued.append(pk))
    conversation = await database_sync_to_async(services.start_conversation)(admin_user)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    await communicator.send_to(text_data=json.dumps({"action": "send", "text": "What time is it in Tokyo?", "HEADERS": {}}))
    frames = [await communicator.receive_from(timeout=5) for _ in range(2)]
    assert any('data-event-type="message"' in f and "Tokyo" in f for f in frames)
    assert queued == [conversation.pk]
    assert await database_sync_to_async(Message.objects.filter(conversation=conversation, role="user").count)() == 1

    # A second message while running is refused with a notice, not lost silently.
    await communicator.send_to(text_data=json.dumps({"action": "send", "text": "again"}))
    notice = await communicator.receive_from(timeout=5)
    assert 'data-testid="notice"' in notice and "still working" in notice

    # No worker has taken the run (the task was never queued here): the cancel ends it at once.
    await communicator.send_to(text_data=json.dumps({"action": "cancel"}))
    frame = await communicator.receive_from(timeout=5)
    assert 'data-status="cancelled"' in frame and 'data-testid="chat-cancelled"' in frame and "before the run started" in frame
    await communicator.disconnect()


async def test_a_cancel_that_arrives_after_the_answer_says_the_run_had_already_finished(redis, admin_user):
    # The person clicked Cancel just as the final answer arrived: the run has ended, and the page says so
    # (an information notice, not an error, and not silence).
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=admin_user, status="running")
    await database_sync_to_async(record_event)(
        conversation.pk, ev.TurnFinished(turn=1, stop_reason="end_turn", status="idle", final=True, reason="end_turn"), status="idle")
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 1}))
    await communicator.send_to(text_data=json.dumps({"action": "cancel"}))
    notice = await communicator.receive_from(timeout=5)
    assert 'data-testid="notice"' in notice and 'data-kind="info"' in notice
    assert "already finished before your cancel arrived" in notice and "nothing was cancelled" in notice
    assert await database_sync_to_async(lambda: Conversation.objects.get(pk=conversation.pk).status)() == "idle"
    assert not await database_sync_to_async(Event.objects.filter(conversation=conversation, type="cancelled").exists)()

    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(status="cancelled")
    await communicator.send_to(text_data=json.dumps({"action": "cancel"}))
    assert "already been cancelled" in await communicator.receive_from(timeout=5)
    await communicator.disconnect()


async def test_people_cannot_answer_with_the_loops_own_choices(redis, admin_user):
    from playground.conversations import events as ev

    conversation = await database_sync_to_async(Conversation.objects.create)(owner=admin_user, status="waiting")
    prompt = await database_sync_to_async(record_event)(conversation.pk, ev.PermissionPrompt(tool_use_id="t", name="echo"))
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": prompt.sequence}))
    await communicator.send_to(text_data=json.dumps({"action": "answer", "prompt": prompt.sequence, "choice": "timeout"}))
    assert "Unknown answer" in await communicator.receive_from(timeout=5)
    await communicator.send_to(text_data=json.dumps({"action": "answer", "prompt": prompt.sequence, "choice": "deny"}))
    frame = await communicator.receive_from(timeout=5)
    assert 'data-event-type="permission_answer"' in frame and f'id="prompt-{conversation.pk}-{prompt.sequence}"' in frame
    await communicator.disconnect()


async def group_send(message: dict) -> None:
    from channels.layers import get_channel_layer

    await get_channel_layer().group_send(message.pop("group"), message)


async def test_a_live_frame_is_forwarded_as_broadcast_and_a_gap_is_filled_from_the_database(redis, admin_user, monkeypatch):
    from playground.conversations.broadcast import EVENT_MESSAGE_TYPE, conversation_group

    conversation = await conversation_with_events(admin_user, 1)
    group = conversation_group(conversation.pk)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 1}))
    assert await communicator.receive_nothing(timeout=0.2)

    # Event 2 is saved, and its message carries a frame that differs from the row: the consumer forwards
    # the message's frame as it came, so it did not read the row.
    with monkeypatch.context() as quiet:
        quiet.setattr(ev, "broadcast_event", lambda *args, **kwargs: None)
        await database_sync_to_async(record_event)(conversation.pk, ev.ChatMessage(role="user", text="saved second"))
    marker = '<span data-frame-sequence="2">carried by the message</span>'
    await group_send({"group": group, "type": EVENT_MESSAGE_TYPE, "conversation_id": conversation.pk, "sequence": 2, "frame": marker})
    assert await communicator.receive_from(timeout=5) == marker

    # A frame that skips sequences (3 and 4 saved, 4's broadcast arriving first): the rows are read instead.
    await database_sync_to_async(record_event)(conversation.pk, ev.ChatMessage(role="user", text="saved third"))
    await database_sync_to_async(record_event)(conversation.pk, ev.ChatMessage(role="user", text="saved fourth"))
    frames = await receive_frames(communicator, 2)  # the real broadcasts of 3 and 4
    assert [frame_sequence(f) for f in frames] == [3, 4] and "saved third" in frames[0]
    await group_send({"group": group, "type": EVENT_MESSAGE_TYPE, "conversation_id": conversation.pk, "sequence": 6, "frame": "never sent"})
    assert await communicator.receive_nothing(timeout=0.3)  # nothing after 4 is saved: nothing to send yet

    # Late and repeated messages are dropped: never a frame twice.
    for sequence in (3, 4):
        await group_send({"group": group, "type": EVENT_MESSAGE_TYPE, "conversation_id": conversation.pk, "sequence": sequence,
                          "frame": "a duplicate"})
    # A message without a frame (too large to carry) makes the consumer render the row itself.
    row = await database_sync_to_async(record_event)(conversation.pk, ev.ChatMessage(role="user", text="saved fifth"))
    frame = await communicator.receive_from(timeout=5)
    assert frame_sequence(frame) == 5 and "saved fifth" in frame
    await group_send({"group": group, "type": EVENT_MESSAGE_TYPE, "conversation_id": conversation.pk, "sequence": row.sequence})
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_a_live_frame_does_not_wait_for_the_thread_that_database_work_shares(redis, admin_user):
    """Every socket's database work runs on one shared thread (`database_sync_to_async`); channels'
    own dispatch would hop there before each message, so at 50 conversations starting at once a
    live frame waited a second and more behind other sockets' work. Here that thread is held
    while a live frame arrives: the frame must still go out."""
    from playground.conversations.broadcast import EVENT_MESSAGE_TYPE, conversation_group

    conversation = await conversation_with_events(admin_user, 1)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 1}))
    assert await communicator.receive_nothing(timeout=0.2)
    release = threading.Event()
    holding = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)(30))
    try:
        marker = '<span data-frame-sequence="2">live while the thread is busy</span>'
        await group_send({"group": conversation_group(conversation.pk), "type": EVENT_MESSAGE_TYPE,
                          "conversation_id": conversation.pk, "sequence": 2, "frame": marker})
        assert await communicator.receive_from(timeout=5) == marker
        assert not holding.done()  # the shared thread was still held when the frame went out
    finally:
        release.set()
        await holding
    await communicator.disconnect()


async def test_the_broadcast_frame_is_the_frame_a_reconnect_renders(redis, admin_user, viewer_user):
    """One rendering serves every viewer (owner and admin alike): it holds nothing that depends on who watches."""
    conversation = await conversation_with_events(viewer_user, 1)
    watchers = [await connect_as(user, conversation.pk) for user in (viewer_user, admin_user)]
    for watcher in watchers:  # the hello's catch-up is done once its frame is here
        await watcher.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
        assert frame_sequence(await watcher.receive_from(timeout=5)) == 1
    prompt = await database_sync_to_async(record_event)(conversation.pk, ev.PermissionPrompt(
        tool_use_id="t1", name="echo", arguments={"text": "hi"}, reason="ask rule", timeout_seconds=60), status="waiting")
    await database_sync_to_async(record_event)(conversation.pk, ev.PermissionAnswer(
        prompt_sequence=prompt.sequence, choice="once", answered_by="admin"), status="running")
    live = [await receive_frames(watcher, 2) for watcher in watchers]
    assert live[0] == live[1]
    assert 'data-status="waiting"' in live[0][0] and 'data-testid="answer-once"' in live[0][0]
    assert 'data-status="running"' in live[0][1] and 'data-answered="once"' in live[0][1]
    # A reconnect after the prompt reads the answer from the database: the same fragment, the status read now.
    late = await connect_as(admin_user, conversation.pk)
    await late.send_to(text_data=json.dumps({"action": "hello", "last_sequence": prompt.sequence}))
    assert await late.receive_from(timeout=5) == live[0][1]
    for communicator in (*watchers, late):
        await communicator.disconnect()
