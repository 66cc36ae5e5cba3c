"""The conversation socket: one group per conversation, frames rendered from saved events.

Authorised in `connect()` by `playground.realtime.socket_refusal` (owner or staff; anonymous is
closed with 4401 and anyone else with 4403, after the handshake so the browser sees the code and does
not retry). The browser says which sequence it has (`hello`) and
gets every later event in order; after that each broadcast makes the consumer send the rows it has
not sent yet, read from the database — never an unsaved event, never one twice. Sending a message,
answering a permission prompt and cancelling come in on the same socket and go to the services.
"""
from __future__ import annotations

import json
import logging

from asgiref.sync import async_to_sync
from channels.generic.websocket import WebsocketConsumer

from playground.engine import safe_json
from playground.conversations import services
from playground.conversations.broadcast import conversation_group
from playground.conversations.fragments import render_event_frame, render_notice
from playground.conversations.models import Conversation, Event
from playground.conversations.selectors import can_view, tokens_total_for
from playground.realtime import refuse_socket, socket_refusal

logger = logging.getLogger(__name__)


class ConversationConsumer(WebsocketConsumer):
    conversation_id: int
    group: str = ""
    last_sent: int | None = None

    def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["pk"])
        user = self.scope.get("user")
        conversation = Conversation.objects.filter(pk=self.conversation_id).first()
        refusal = socket_refusal(user, lambda u: conversation is not None and can_view(u, conversation))
        if refusal is not None:
            refuse_socket(self, refusal)
            return
        self.accept()
        self.group = conversation_group(self.conversation_id)
        async_to_sync(self.channel_layer.group_add)(self.group, self.channel_name)

    def disconnect(self, code: int) -> None:
        if self.group:
            async_to_sync(self.channel_layer.group_discard)(self.group, self.channel_name)

    # -- from the browser ------------------------------------------------------------------------
    def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.group:
            return
        try:
            data = safe_json.loads(text_data or "{}")
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict):  # not JSON, over the nesting/number limits, or not an object
            self.send(text_data=render_notice(self.conversation_id, "Unreadable message from the browser."))
            return
        action = data.get("action") or ("hello" if "last_sequence" in data else "send")
        user = self.scope.get("user")
        conversation = Conversation.objects.get(pk=self.conversation_id)
        try:
            if action == "hello":
                self.last_sent = _int(data.get("last_sequence"), 0)
                self.catch_up()
            elif action == "send":
                services.send_message(conversation, str(data.get("text", "")), user=user)
                self.send(text_data=render_notice(self.conversation_id, ""))
            elif action == "answer":
                choice = str(data.get("choice", ""))
                if choice not in services.PERMISSION_CHOICES:  # timeout / cancelled are the loop's to record
                    raise services.ConversationError(f"Unknown answer {choice!r}: choose once, always or deny.")
                services.answer_permission(conversation, _int(data.get("prompt"), 0), choice, user=user)
            elif action == "cancel":
                if not services.request_cancel(conversation, user=user):
                    self.send(text_data=render_notice(self.conversation_id, "Nothing is running."))
            else:
                self.send(text_data=render_notice(self.conversation_id, f"Unknown action {action!r}."))
        except services.ConversationError as exc:
            self.send(text_data=render_notice(self.conversation_id, str(exc)))

    # -- from the channel layer --------------------------------------------------------------------
    def conversation_event(self, message: dict) -> None:
        if self.last_sent is None:
            return  # the hello's catch-up will include it
        self.catch_up()

    def catch_up(self) -> None:
        # Events first, then the conversation: each status change is saved with its event, so the
        # status read afterwards is at least as new as the last event sent (read before, a frame
        # could carry a stale "running" after the final turn_finished, and nothing would fix it).
        events = list(Event.objects.filter(conversation_id=self.conversation_id, sequence__gt=self.last_sent or 0).order_by("sequence"))
        if not events:
            return
        conversation = Conversation.objects.get(pk=self.conversation_id)
        # One totals read for the whole catch-up (the totals element is replaced by each turn's frame,
        # so the last one wins), not one scan of every turn per turn.
        turns = sum(1 for e in events if e.type == "turn_started" and not e.parent_sequence)
        total = tokens_total_for(self.conversation_id) if turns > 1 else None
        for event in events:
            self.send(text_data=render_event_frame(conversation, event, total=total))
            self.last_sent = event.sequence


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
