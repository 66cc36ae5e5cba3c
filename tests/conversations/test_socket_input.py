"""Hostile messages on the conversation socket get a notice, and the socket stays open."""
from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from playground.conversations.models import Conversation
from tests.conversations.test_consumer import connect_as

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("text", ["[" * 3_000 + "]" * 3_000, '{"action": "hello", "last_sequence": ' + "9" * 5_000 + "}",
                                  "[1, 2]", '"text"', '{"action": NaN}', "not json"])
async def test_an_unreadable_message_gets_a_notice_and_the_socket_stays_open(redis, admin_user, text):
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=admin_user)
    communicator = await connect_as(admin_user, conversation.pk)
    await communicator.send_to(text_data=text)
    assert "Unreadable message from the browser." in await communicator.receive_from(timeout=5)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    assert await communicator.receive_nothing(timeout=0.3)  # still connected: nothing to replay, no error
    await communicator.disconnect()
