"""The conversation socket: one group per conversation, frames rendered from saved events.

Authorised in `connect()` by `playground.realtime.socket_refusal` (every role watches; anonymous is
closed with 4401 and anyone without a role with 4403, after the handshake so the browser sees the code and does
not retry). The browser says which sequence it has (`hello`) and gets every later event in order,
read from the database. After that each broadcast carries its event's frame (rendered once by the
process that saved it, broadcast.py): when it is the next one this socket owes, it is forwarded as
it is — no database read, no thread hop; when it is not (a gap: a frame too large to carry, a lost
message, two writers whose broadcasts crossed) the consumer reads the rows it has not sent yet from
the database instead. Never an unsaved event, never one twice. Sending a message, answering a
permission prompt and cancelling come in on the same socket and go to the services, for the owner
or an admin; anyone else watching gets a notice instead.

An async consumer: a live frame is handled on the server's event loop. Database work (the checks,
the catch-up, the actions) runs in `database_sync_to_async`, which also closes stale connections.
"""
from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from playground.conversations import services, sharing
from playground.conversations.broadcast import conversation_group
from playground.conversations.fragments import SHARED_KEY, render_event_frame, render_notice
from playground.conversations.models import Conversation, Event
from playground.conversations.selectors import can_act, can_view, tokens_total_for
from playground.realtime import CLOSE_FORBIDDEN, LoopDispatch, arefuse_socket, frame_int, read_browser_frame, socket_refusal

logger = logging.getLogger(__name__)


class ConversationConsumer(LoopDispatch, AsyncWebsocketConsumer):
    conversation_id: int
    group: str = ""
    last_sent: int | None = None
    shared = False  # a share link's anonymous socket: its own frames (no forms, no names, no internal id)
    frame_key = "frame"  # which of a broadcast's frames this socket forwards

    @property
    def dom_key(self) -> int | str:
        return SHARED_KEY if self.shared else self.conversation_id

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["pk"])
        await self.admit()

    async def admit(self) -> None:
        refusal = await database_sync_to_async(self._refusal)(self.scope.get("user"))
        if refusal is not None:
            await arefuse_socket(self, refusal)
            return
        await self.accept()
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)

    def _refusal(self, user: object) -> int | None:
        conversation = Conversation.objects.filter(pk=self.conversation_id).first()
        return socket_refusal(user, lambda u: conversation is not None and can_view(u, conversation))

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    # -- from the browser ------------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.group:
            return
        data = read_browser_frame(text_data)
        if data is None:  # not JSON, over the nesting/number limits, or not an object
            await self.send(text_data=render_notice(self.dom_key, "Unreadable message from the browser."))
            return
        action = data.get("action") or ("hello" if "last_sequence" in data else "send")
        if action == "hello":
            self.last_sent = frame_int(data.get("last_sequence"), 0)
            await self.catch_up()
            return
        notice = await database_sync_to_async(self._act)(action, data)
        if notice is not None:
            text, kind = notice if isinstance(notice, tuple) else (notice, "")
            await self.send(text_data=render_notice(self.dom_key, text, kind=kind))

    def _act(self, action: str, data: dict) -> str | tuple[str, str] | None:
        """Do what the browser asked; the notice to show (an error, or (text, kind)), or None."""
        user = self.scope.get("user")
        conversation = Conversation.objects.get(pk=self.conversation_id)
        if action in ("send", "answer", "cancel") and not can_act(user, conversation):
            return "You are watching this conversation: only its owner or an admin can send, answer or cancel."
        try:
            if action == "send":
                services.send_message(conversation, str(data.get("text", "")), user=user)
                return ""
            if action == "answer":
                choice = str(data.get("choice", ""))
                if choice not in services.PERMISSION_CHOICES:  # timeout / cancelled are the loop's to record
                    raise services.ConversationError(f"Unknown answer {choice!r}: choose once, always or deny.")
                services.answer_permission(conversation, frame_int(data.get("prompt"), 0), choice, user=user)
                return None
            if action == "cancel":
                return None if services.request_cancel(conversation, user=user) else (services.nothing_to_cancel(conversation), "info")
            return f"Unknown action {action!r}."
        except services.ConversationError as exc:
            return str(exc)

    # -- from the channel layer --------------------------------------------------------------------
    async def share_revoked(self, message: dict) -> None:
        """A share link of this conversation was revoked: only the shared view's sockets care."""

    async def conversation_event(self, message: dict) -> None:
        if self.last_sent is None:
            return  # the hello's catch-up will include it
        sequence, frame = frame_int(message.get("sequence"), 0), message.get(self.frame_key)
        if sequence <= self.last_sent:
            return  # sent already (by a catch-up that read it from the database)
        if sequence == self.last_sent + 1 and isinstance(frame, str):
            self.last_sent = sequence
            await self.send(text_data=frame)
            return
        await self.catch_up()

    async def catch_up(self) -> None:
        frames = await database_sync_to_async(self._frames_after)(self.last_sent or 0)
        for sequence, frame in frames:
            self.last_sent = sequence
            await self.send(text_data=frame)

    def _frames_after(self, last_sent: int) -> list[tuple[int, str]]:
        # Events first, then the conversation: each status change is saved with its event, so the
        # status read afterwards is at least as new as the last event sent (read before, a frame
        # could carry a stale "running" after the final turn_finished, and nothing would fix it).
        events = list(Event.objects.filter(conversation_id=self.conversation_id, sequence__gt=last_sent).order_by("sequence"))
        if not events:
            return []
        conversation = Conversation.objects.get(pk=self.conversation_id)
        # One totals read for the whole catch-up (the totals element is replaced by each turn's frame,
        # so the last one wins), not one scan of every turn per turn.
        turns = sum(1 for e in events if e.type == "turn_started" and not e.parent_sequence)
        total = tokens_total_for(self.conversation_id) if turns > 1 else None
        return [(event.sequence, render_event_frame(conversation, event, total=total, shared=self.shared)) for event in events]



class SharedConversationConsumer(ConversationConsumer):
    """`ws/shared/<token>/`: a share link's socket (sharing.py). Admits anyone holding a working link,
    logged in or not, with a viewer's rights: the same frames, hello and catch-up, nothing that acts.
    Closed with 4403 when the link is refused, when it expires and when its owner revokes it."""

    link_id: int | None = None
    expiry: asyncio.TimerHandle | None = None
    shared = True
    frame_key = "shared_frame"

    async def connect(self) -> None:
        link = await database_sync_to_async(self._link)(str(self.scope["url_route"]["kwargs"]["token"]))
        if link is None:
            await arefuse_socket(self, CLOSE_FORBIDDEN)
            return
        self.link_id, self.conversation_id = link.pk, link.conversation_id
        await self.accept()
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # The link's end, without a timer task per socket: one handle on the loop.
        self.expiry = asyncio.get_running_loop().call_later(sharing.seconds_left(link), self._expire)

    @staticmethod
    def _link(token: str):
        try:
            return sharing.resolve(token)
        except sharing.ShareLinkRefused:
            return None

    def _expire(self) -> None:
        asyncio.ensure_future(self._close_link())

    async def _close_link(self) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = ""
        await self.close(code=CLOSE_FORBIDDEN)

    async def disconnect(self, code: int) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
        await super().disconnect(code)

    async def share_revoked(self, message: dict) -> None:
        if message.get("link") == self.link_id:
            await self._close_link()

    def _act(self, action: str, data: dict) -> str:
        return "This is a shared, read-only view of the conversation."
