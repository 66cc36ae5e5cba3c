"""Realtime plumbing shared by the apps: send to a channel-layer group from sync code, admit a socket.

Sending. Celery tasks and views are sync code. `async_to_sync(layer.group_send)` there runs a
fresh event loop per call, and channels_redis binds its Redis connections to the loop that opened
them: a layer kept across calls then fails with "Event loop is closed", and a layer made per call
pays a new loop, a new layer and a new Redis connection for every event. Instead each process keeps
one channel layer (and so one Redis connection pool) on an event loop of its own, an anyio portal on
a daemon thread (`per_process.broadcast_portal()`): not the process's main loop, where conversation
runs build their turns (per_process.py), so a frame never waits behind another run's CPU work.
`send_to_group` hands the coroutine to that loop and waits for it with a timeout (a run on the main
loop yields meanwhile). Listening (`listening_to_group`, MCP callbacks on the main loop) keeps a
layer of its own there. After a fork (Celery's prefork pool) the
child starts its own portal and layer on first use: the parent's thread does not exist in the child.

Dispatching on the event loop. channels' `AsyncConsumer.dispatch` awaits `aclose_old_connections()`
before every message: a hop to the one thread that every socket's `database_sync_to_async` work
shares. A live frame then waits behind other sockets' checks and actions (at 50 conversations
starting at once, a second and more). `LoopDispatch` skips that hop; a consumer using it touches
the database only through `database_sync_to_async`, which closes stale connections itself.

Admitting sockets. `socket_refusal` is the one check both WebSocket consumers make, and
`refuse_socket` / `arefuse_socket` the one way they refuse:

* anonymous → close code 4401, an authenticated user without access → 4403;
* the consumer accepts first and then closes with that code. A close before the handshake becomes
  an HTTP 403 that the browser reports as code 1006, and htmx's ws extension reconnects on 1006
  forever; after the handshake the page sees 4401/4403 and does not retry.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any, Callable

from channels.consumer import get_handler_name
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.core.signals import setting_changed

from playground.engine import safe_json
from playground.per_process import PerProcess, broadcast_portal, portal

SEND_TIMEOUT_SECONDS = 5.0
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class _Sender:
    """This process's channel layers: `layer` for sending, used only on the broadcast loop
    (per_process.broadcast_portal()); `listen_layer` for listening, only on the main loop (portal())."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.layer: Any = None
        self.listen_layer: Any = None

    async def _group_send(self, group: str, message: dict) -> None:
        if self.layer is None:
            # Our own instance, used only on this loop (the server's consumers keep theirs).
            self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        await self.layer.group_send(group, message)

    async def _drop_layer(self) -> None:
        layer, self.layer = self.layer, None
        if layer is not None:
            await close_layer(layer)

    async def _drop_listen_layer(self) -> None:
        layer, self.listen_layer = self.listen_layer, None
        if layer is not None:
            await close_layer(layer)

    def submit(self, coroutine: Any, timeout: float) -> Any:
        try:
            return broadcast_portal().wait(coroutine, timeout)  # a run on the main loop yields meanwhile
        except TimeoutError:
            raise TimeoutError(f"the channel layer did not answer within {timeout:g} s") from None


_senders: PerProcess[_Sender] = PerProcess(_Sender)


async def close_layer(layer: Any) -> None:
    """Close a channel layer's Redis connections, whichever channels_redis layer it is (the list
    layer closes its pools; the pub/sub layer's flush unsubscribes and closes)."""
    # By class: the pub/sub layer answers any attribute through its per-loop layer. The list layer's
    # flush would delete every key under its prefix, so it closes its pools instead.
    if hasattr(type(layer), "close_pools"):
        await layer.close_pools()
    else:
        await layer.flush()


def _get_sender() -> _Sender:
    return _senders.get()


def _reset_on_settings_change(*, setting: str, **_: object) -> None:
    # Tests point CHANNEL_LAYERS at their own prefix: the next send must use the new configuration.
    sender = _senders.made()
    if setting == "CHANNEL_LAYERS" and sender is not None:
        try:
            sender.submit(sender._drop_layer(), SEND_TIMEOUT_SECONDS)
        except Exception:  # noqa: BLE001 - a layer that cannot close is dropped all the same
            sender.layer = None
        if sender.listen_layer is not None:
            try:
                portal().wait(sender._drop_listen_layer(), SEND_TIMEOUT_SECONDS)
            except Exception:  # noqa: BLE001 - as above
                sender.listen_layer = None


setting_changed.connect(_reset_on_settings_change)


def send_to_group(group: str, message: dict, *, timeout: float = SEND_TIMEOUT_SECONDS) -> None:
    """Send `message` to channel-layer `group` from sync code; raise if it fails or takes over `timeout` s.

    Not for async code (it would block that event loop): there, await `channel_layer.group_send`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("send_to_group() is for sync code; await the channel layer's group_send instead")
    sender = _get_sender()
    sender.submit(sender._group_send(group, message), timeout)


@contextlib.asynccontextmanager
async def listening_to_group(group: str):
    """On the process's portal loop (async code running there, e.g. an MCP session's callback):
    join `group` on a channel of this process's layer and yield `receive()`, which waits for the
    next message sent to the group (`send_to_group` from any process). Left on exit. Join first,
    then check what you wait for, then `receive()`: a message sent in between is not lost."""
    sender = _get_sender()
    if sender.listen_layer is None:
        sender.listen_layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    layer = sender.listen_layer
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        yield lambda: layer.receive(channel)
    finally:
        try:
            await layer.group_discard(group, channel)
        except Exception:  # noqa: BLE001 - the group expires on its own
            pass


# -- sockets ------------------------------------------------------------------------------------------
class LoopDispatch:
    """Mix into an async consumer, before its channels base class: every message (socket or channel
    layer) is handled on the event loop without channels' per-message hop to the sync thread.
    The consumer's own database work must go through `database_sync_to_async` (which closes stale
    connections before and after), never straight from a handler."""

    async def dispatch(self, message: dict) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message.get('type')!r}")
        await handler(message)


def socket_refusal(user: Any, may_access: Callable[[Any], bool] | None = None) -> int | None:
    """The close code to refuse a socket with, or None to admit it.

    4401 when nobody is logged in; 4403 when `may_access(user)` says this user may not see it.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return CLOSE_UNAUTHENTICATED
    if may_access is not None and not may_access(user):
        return CLOSE_FORBIDDEN
    return None


def refuse_socket(consumer: Any, code: int) -> None:
    """Refuse a sync consumer's socket: accept, then close with `code` (so the browser sees it)."""
    consumer.accept()
    consumer.close(code=code)


async def arefuse_socket(consumer: Any, code: int) -> None:
    """`refuse_socket` for async consumers."""
    await consumer.accept()
    await consumer.close(code=code)


def read_browser_frame(text_data: str | None) -> dict | None:
    """A socket frame from the browser as a JSON object; None when it is not JSON, is over the
    nesting or number limits, or is not an object (the consumer answers with a notice)."""
    try:
        data = safe_json.loads(text_data or "{}")
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def frame_int(value: object, default: int) -> int:
    """An integer field of a browser frame, or `default` when it is missing or not a number."""
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return default
