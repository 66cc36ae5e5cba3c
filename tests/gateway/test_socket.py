"""A gateway session's socket: admins only, replay from a last sequence, live frames rendered from
the page's own template, prompt answers sent over it."""
from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from playground.gateway.events import record_event
from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession
from playground.registry.models import AgentProfile
from playground.routing import websocket_urlpatterns

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
FRAME = re.compile(r'data-frame-sequence="(\d+)"')


def sequence_of(frame: str) -> int:
    return int(FRAME.search(frame).group(1))


async def connect_as(user, session_pk: int) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/gateway/sessions/{session_pk}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


@database_sync_to_async
def session_with_events(count: int) -> GatewaySession:
    profile = AgentProfile.objects.create(name="Socket profile", tool_search_mode="true")
    session = GatewaySession.objects.create(session_id="sock-1", profile=profile, client_name="claude-code")
    for i in range(count):
        record_event(session.pk, GatewayEvent.Type.TOOLS_LISTED, {"tools": ["echo"], "count": 1, "tokens": 100 + i,
                                                                  "tool_search": True, "deferred_count": 3})
    return session


async def test_hello_replays_what_the_page_lacks_then_live_events_arrive_once(redis_layer, admin_user):
    session = await session_with_events(3)
    communicator = await connect_as(admin_user, session.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 1}))
    frames = [await communicator.receive_from(timeout=5) for _ in range(2)]
    assert [sequence_of(f) for f in frames] == [2, 3]
    assert f'id="gateway-events-{session.pk}" hx-swap-oob="beforeend"' in frames[0] and "about 101 tokens" in frames[0]
    assert await communicator.receive_nothing(timeout=0.3)

    def search():
        GatewaySession.objects.filter(pk=session.pk).update(discovered_tools=["mcp__weather__get_forecast"])
        record_event(session.pk, GatewayEvent.Type.TOOL_SEARCH, {
            "query": "weather", "backend": "hybrid", "matches": ["mcp__weather__get_forecast"],
            "scores": [{"name": "mcp__weather__get_forecast", "score": 2.5}], "added": ["mcp__weather__get_forecast"]})

    await database_sync_to_async(search)()
    frame = await communicator.receive_from(timeout=5)
    assert sequence_of(frame) == 4 and 'data-type="tool_search"' in frame and "2.500" in frame
    assert f'id="gateway-discovered-{session.pk}" data-testid="gateway-discovered" hx-swap-oob="outerHTML"' in frame
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_only_admins_may_watch(redis_layer, admin_user, viewer_user):
    session = await session_with_events(1)
    viewer = await connect_as(viewer_user, session.pk)
    assert await viewer.receive_output(timeout=5) == {"type": "websocket.close", "code": 4403}
    missing = await connect_as(admin_user, session.pk + 1000)
    assert await missing.receive_output(timeout=5) == {"type": "websocket.close", "code": 4403}
    await viewer.disconnect()
    await missing.disconnect()


async def test_a_prompt_is_answered_over_the_socket_once_and_its_buttons_go(redis_layer, admin_user):
    session = await session_with_events(0)

    def ask():
        prompt = GatewayPrompt.objects.create(session=session, tool_name="calculator", arguments={"expression": "1"})
        record_event(session.pk, GatewayEvent.Type.PERMISSION_ASKED, {"prompt_id": prompt.pk, "name": "calculator",
                                                                     "arguments": {"expression": "1"}, "reason": "ask rule"})
        return prompt

    prompt = await database_sync_to_async(ask)()
    communicator = await connect_as(admin_user, session.pk)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    asked = await communicator.receive_from(timeout=5)
    assert "Approve once" in asked and "ws-send" in asked

    await communicator.send_to(text_data=json.dumps({"action": "answer", "prompt": prompt.pk, "answer": "maybe"}))
    assert "Answer allowed or denied" in await communicator.receive_from(timeout=5)
    await communicator.send_to(text_data=json.dumps({"action": "answer", "prompt": str(prompt.pk), "choice": "deny"}))
    frames = [await communicator.receive_from(timeout=5) for _ in range(2)]
    answered = next(f for f in frames if FRAME.search(f))
    assert sequence_of(answered) == 2 and "denied by alice" in answered
    # The asked event is re-rendered in place, without its buttons.
    assert f'id="gateway-event-{session.pk}-1"' in answered and "Approve once" not in answered
    await communicator.send_to(text_data=json.dumps({"action": "answer", "prompt": prompt.pk, "answer": "allowed"}))
    assert "already answered" in await communicator.receive_from(timeout=5)
    assert (await database_sync_to_async(lambda: GatewayPrompt.objects.get(pk=prompt.pk).status)()) == "denied"
    await communicator.disconnect()
