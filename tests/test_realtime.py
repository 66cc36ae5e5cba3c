"""playground.realtime: one channel layer per process for sends from sync code, and one socket check."""
from __future__ import annotations

import asyncio
import os
import threading

import pytest
from django.contrib.auth.models import AnonymousUser

from playground import per_process, realtime
from tests.conversations.conftest import redis  # noqa: F401 (fixture: this run's Redis channel layer)


def receive_on_group(group: str, ready: threading.Event, box: list, count: int = 1) -> None:
    """A listener like a consumer: its own loop and layer, joined to `group`."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    async def listen() -> None:
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        ready.set()
        try:
            for _ in range(count):
                box.append(await asyncio.wait_for(layer.receive(channel), timeout=10))
        finally:
            await layer.group_discard(group, channel)
            await realtime.close_layer(layer)

    asyncio.run(listen())


def test_sends_reach_the_group_through_one_layer_kept_for_the_process(redis):  # noqa: F811
    ready, box = threading.Event(), []
    listener = threading.Thread(target=receive_on_group, args=("realtime-test", ready, box, 3))
    listener.start()
    assert ready.wait(10)
    for n in range(3):
        realtime.send_to_group("realtime-test", {"type": "test.message", "n": n})
    listener.join(15)
    assert [m["n"] for m in box] == [0, 1, 2]
    sender, loop = realtime._get_sender(), per_process.portal()
    layer = sender.layer
    realtime.send_to_group("realtime-test", {"type": "test.message"})
    # No new loop, layer or pool per send: the process's portal thread keeps them.
    assert realtime._get_sender() is sender and sender.layer is layer and per_process.portal() is loop
    assert loop.thread_id in {thread.ident for thread in threading.enumerate() if thread.is_alive()}


def test_a_forked_child_gets_its_own_sender(redis):  # noqa: F811
    realtime.send_to_group("realtime-test", {"type": "test.message"})
    parent, parent_loop = realtime._get_sender(), per_process.portal()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it must not use the parent's (absent) thread
        code = 1
        try:
            child = realtime._get_sender()
            realtime.send_to_group("realtime-test", {"type": "test.message"}, timeout=5)
            own_loop = per_process.portal() is not parent_loop
            code = 0 if child is not parent and child.pid == os.getpid() and own_loop else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == bytes([0])
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert realtime._get_sender() is parent and per_process.portal() is parent_loop


def test_send_to_group_refuses_to_block_an_event_loop():
    async def inside_a_loop() -> None:
        realtime.send_to_group("g", {"type": "x"})

    with pytest.raises(RuntimeError, match="for sync code"):
        asyncio.run(inside_a_loop())


@pytest.mark.parametrize("backend", ["channels_redis.pubsub.RedisPubSubChannelLayer", "channels_redis.core.RedisChannelLayer"])
def test_a_failing_layer_raises_within_the_timeout(settings, backend):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": backend, "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    with pytest.raises(Exception):  # noqa: B017 - refused connection, whatever the client calls it
        realtime.send_to_group("g", {"type": "x"}, timeout=5)


class User:
    def __init__(self, authenticated: bool) -> None:
        self.is_authenticated = authenticated


def test_socket_refusal_codes():
    assert realtime.socket_refusal(None) == realtime.socket_refusal(AnonymousUser()) == 4401
    assert realtime.socket_refusal(AnonymousUser(), lambda user: True) == 4401
    assert realtime.socket_refusal(User(True)) is None
    assert realtime.socket_refusal(User(True), lambda user: False) == 4403
    assert realtime.socket_refusal(User(True), lambda user: True) is None
