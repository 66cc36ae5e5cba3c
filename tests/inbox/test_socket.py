"""The inbox socket: the count (and the list, when the page shows it) for its own user, sent again
whenever any prompt opens or is settled, wherever it was answered."""
from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from playground.conversations import services
from playground.gateway.models import GatewayPrompt
from playground.routing import websocket_urlpatterns
from tests.inbox.conftest import waiting_conversation, waiting_gateway_call

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
COUNT = re.compile(r'data-testid="inbox-count" data-count="(\d+)"')


async def connect_as(user, *, with_list: bool) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/inbox/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    await communicator.send_to(text_data=json.dumps({"action": "hello", "list": with_list}))
    return communicator


async def count_in(communicator) -> tuple[int, str]:
    frame = await communicator.receive_from(timeout=10)
    return int(COUNT.search(frame).group(1)), frame


async def test_counts_follow_prompts_per_user_and_an_answer_on_the_source_page_updates_the_inbox(redis_layer, operator, admin_user):
    conversation, prompt = await database_sync_to_async(waiting_conversation)(operator)
    mine = await connect_as(operator, with_list=False)
    admins = await connect_as(admin_user, with_list=True)
    assert (await count_in(mine))[0] == 1
    count, frame = await count_in(admins)
    assert count == 1 and 'id="prompt-inbox-list"' in frame and 'data-source="conversation"' in frame

    # A gateway call starts waiting: only the admin's count grows.
    await database_sync_to_async(waiting_gateway_call)()
    assert (await count_in(mine))[0] == 1
    count, frame = await count_in(admins)
    assert count == 2 and 'data-source="gateway"' in frame

    # Answered on the conversation's own page (its service): both inboxes drop it.
    await database_sync_to_async(services.answer_permission)(conversation, prompt.sequence, "once", user=operator, resume=False)
    assert (await count_in(mine))[0] == 0
    count, frame = await count_in(admins)
    assert count == 1 and 'data-source="conversation"' not in frame
    for communicator in (mine, admins):
        await communicator.disconnect()


async def test_an_answer_sent_over_the_inbox_socket_settles_the_gateway_call(redis_layer, admin_user):
    _, prompt = await database_sync_to_async(waiting_gateway_call)()
    admins = await connect_as(admin_user, with_list=True)
    assert (await count_in(admins))[0] == 1
    await admins.send_to(text_data=json.dumps({"action": "answer", "source": "gateway", "prompt": str(prompt.pk),
                                               "choice": "once"}))
    frames = [await admins.receive_from(timeout=10) for _ in range(2)]  # the cleared notice, the new list
    assert any(COUNT.search(f) and COUNT.search(f).group(1) == "0" for f in frames)
    assert (await database_sync_to_async(lambda: GatewayPrompt.objects.get(pk=prompt.pk).status)()) == "allowed"
    await admins.send_to(text_data=json.dumps({"action": "answer", "source": "gateway", "prompt": prompt.pk, "choice": "deny"}))
    assert "already answered" in await admins.receive_from(timeout=10)
    await admins.disconnect()


async def test_viewers_and_anonymous_are_refused(redis_layer, viewer):
    from django.contrib.auth.models import AnonymousUser

    for user, code in ((viewer, 4403), (AnonymousUser(), 4401)):
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/inbox/")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect(timeout=10)
        assert connected  # accepted, then closed with the code (no endless reconnects)
        assert (await communicator.receive_output(timeout=5))["code"] == code
