"""WebSocket consumer for live MCP server status (authenticated users only)."""
from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer

from playground.mcp_servers.status import STATUS_GROUP


class McpStatusConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(STATUS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(STATUS_GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens; anything it sends is ignored."""

    async def status_update(self, event: dict) -> None:
        await self.send(text_data=event["html"])
