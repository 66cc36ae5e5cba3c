"""The prompt inbox's socket: the navigation bar's count on every page, and the inbox page's list.

Every change to a prompt (opened, answered, expired, its run cancelled) reaches the inbox group
(`prompt_cards.tell_prompt_inbox`, after commit); each socket then reads its own user's prompts
again, so a count or a list never shows a prompt the user may not answer, nor one that is settled.
The page says in its `hello` whether it shows the list. Answers come in on the same socket and go
to the prompt's own service (services.py), as its own page's would.
"""
from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.generic.websocket import WebsocketConsumer
from django.template.loader import render_to_string

from playground.access import OPERATOR, has_role
from playground.inbox.selectors import inbox_cards
from playground.inbox.services import answer
from playground.prompt_cards import PROMPT_INBOX_GROUP
from playground.realtime import read_browser_frame, refuse_socket, socket_refusal


class PromptInboxConsumer(WebsocketConsumer):
    joined: bool = False
    with_list: bool = False

    def connect(self) -> None:
        refusal = socket_refusal(self.scope.get("user"), lambda user: has_role(user, OPERATOR))
        if refusal is not None:
            refuse_socket(self, refusal)
            return
        self.accept()
        async_to_sync(self.channel_layer.group_add)(PROMPT_INBOX_GROUP, self.channel_name)
        self.joined = True

    def disconnect(self, code: int) -> None:
        if self.joined:
            async_to_sync(self.channel_layer.group_discard)(PROMPT_INBOX_GROUP, self.channel_name)

    def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.joined:
            return
        data = read_browser_frame(text_data)
        if data is None:
            self.send_notice("Unreadable message from the browser.")
            return
        action = data.get("action")
        if action == "hello":
            self.with_list = bool(data.get("list"))
            self.send_inbox()
        elif action == "answer":
            self.send_notice(answer(self.scope.get("user"), data))
        else:
            self.send_notice(f"Unknown action {str(action)[:40]!r}.")

    def inbox_changed(self, message: dict) -> None:
        if self.joined:
            self.send_inbox()

    def send_inbox(self) -> None:
        cards = inbox_cards(self.scope.get("user"))
        self.send(text_data=render_to_string("inbox/_frame.html", {
            "cards": cards, "keys": [card.key for card in cards], "with_list": self.with_list,
            # No request behind a socket frame: the cards' forms are sent over this socket (ws-send).
            "csrf_token": "NOTPROVIDED",
        }))

    def send_notice(self, text: str) -> None:
        if self.with_list:
            self.send(text_data=render_to_string("inbox/_notice.html", {"text": text, "oob": True}))
