"""WebSocket consumer for live MCP server status (authenticated users only: anonymous is closed with
4401 after the handshake, by `playground.realtime.socket_refusal`)."""
from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from playground.access import ADMIN, VIEWER, has_role
from playground.mcp_servers.server_log import log_group
from playground.mcp_servers.status import STATUS_GROUP, server_group
from playground.realtime import LoopDispatch, arefuse_socket, socket_refusal


class McpStatusConsumer(LoopDispatch, AsyncWebsocketConsumer):
    """`ws/mcp/status/`: every server's badge; `ws/mcp/status/<server_id>/`: one server's badge and
    summary, plus (admins only) its live log lines."""

    group = STATUS_GROUP
    joined = False
    groups_joined: tuple[str, ...] = ()

    async def connect(self) -> None:
        # The role is read from the database (the user's permissions): in a thread, not on the event loop.
        refusal = await database_sync_to_async(socket_refusal)(self.scope.get("user"), lambda user: has_role(user, VIEWER))
        if refusal is not None:
            await arefuse_socket(self, refusal)
            return
        server_id = self.scope.get("url_route", {}).get("kwargs", {}).get("server_id")
        self.group = server_group(server_id) if server_id is not None else STATUS_GROUP
        groups = [self.group]
        # A server's live log (stderr, log messages) is for admins only: others get the status alone.
        if server_id is not None and await database_sync_to_async(has_role)(self.scope.get("user"), ADMIN):
            groups.append(log_group(server_id))
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        self.groups_joined = tuple(groups)
        self.joined = True
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens; anything it sends is ignored."""

    async def status_update(self, event: dict) -> None:
        await self.send(text_data=event["html"])
