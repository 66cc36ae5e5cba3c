"""The gateway session socket: one group per MCP session, frames rendered from saved events.

Authorised in `connect()` by `playground.realtime.socket_refusal` (admins, as the session pages;
anonymous is closed with 4401 and anyone else with 4403, after the handshake). The page says which
sequence it has (`hello`) and gets every later event in order; after that each broadcast makes the
consumer send the rows it has not sent yet, read from the database: never an unsaved event, never
one twice. Answers to permission prompts come in on the same socket.
"""
from __future__ import annotations


from asgiref.sync import async_to_sync
from channels.generic.websocket import WebsocketConsumer

from playground.access import ADMIN, has_role
from playground.gateway.broadcast import session_group
from playground.gateway.fragments import pending_prompts, render_event_frame, render_notice
from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession
from playground.gateway.prompts import answer_of
from playground.gateway.service import answer_prompt
from playground.realtime import frame_int, read_browser_frame, refuse_socket, socket_refusal

EVENTS_PER_CATCH_UP = 500


class GatewaySessionConsumer(WebsocketConsumer):
    session_pk: int
    group: str = ""
    last_sent: int | None = None

    def connect(self) -> None:
        self.session_pk = int(self.scope["url_route"]["kwargs"]["pk"])
        exists = GatewaySession.objects.filter(pk=self.session_pk).exists()
        refusal = socket_refusal(self.scope.get("user"), lambda user: has_role(user, ADMIN) and exists)
        if refusal is not None:
            refuse_socket(self, refusal)
            return
        self.accept()
        self.group = session_group(self.session_pk)
        async_to_sync(self.channel_layer.group_add)(self.group, self.channel_name)

    def disconnect(self, code: int) -> None:
        if self.group:
            async_to_sync(self.channel_layer.group_discard)(self.group, self.channel_name)

    def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.group:
            return
        data = read_browser_frame(text_data)
        if data is None:  # not JSON, over the nesting/number limits, or not an object
            self.send(text_data=render_notice(self.session_pk, "Unreadable message from the browser."))
            return
        action = data.get("action") or ("hello" if "last_sequence" in data else "")
        if action == "hello":
            self.last_sent = frame_int(data.get("last_sequence"), 0)
            self.catch_up()
        elif action == "answer":
            self.answer(frame_int(data.get("prompt"), 0), answer_of(str(data.get("choice") or data.get("answer") or "")))
        else:
            self.send(text_data=render_notice(self.session_pk, f"Unknown action {action!r}."))

    def answer(self, prompt_pk: int, answer: str | None) -> None:
        if answer is None:
            self.send(text_data=render_notice(self.session_pk, "Answer allowed or denied."))
            return
        if not GatewayPrompt.objects.filter(pk=prompt_pk, session_id=self.session_pk).exists():
            self.send(text_data=render_notice(self.session_pk, "No such prompt in this session."))
            return
        if not answer_prompt(prompt_pk, answer, user=self.scope.get("user")):
            self.send(text_data=render_notice(self.session_pk, "That prompt was already answered (the first answer stands)."))
            return
        self.send(text_data=render_notice(self.session_pk, ""))

    def gateway_event(self, message: dict) -> None:
        if self.last_sent is None:
            return  # the hello's catch-up will include it
        self.catch_up()

    def catch_up(self) -> None:
        while True:
            events = list(GatewayEvent.objects.filter(session_id=self.session_pk, sequence__gt=self.last_sent or 0)
                          .order_by("sequence")[:EVENTS_PER_CATCH_UP])
            if not events:
                return
            # Read after the events: the discovered tools and open prompts are at least as new as them.
            session = GatewaySession.objects.select_related("profile", "token").get(pk=self.session_pk)
            pending = pending_prompts(session)
            for event in events:
                self.send(text_data=render_event_frame(session, event, pending))
                self.last_sent = event.sequence

