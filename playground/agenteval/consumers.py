"""`ws/agenteval/runs/<pk>/`: a task run's progress panel and grid cells, pushed after each step (viewers and up)."""
from __future__ import annotations

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from playground.access import VIEWER, has_role
from playground.agenteval.broadcast import add_watcher, progress_html, remove_watcher, run_group
from playground.agenteval.models import TaskRun
from playground.realtime import LoopDispatch, arefuse_socket, socket_refusal


def _current_panel(run_id: int) -> str | None:
    run = TaskRun.objects.filter(pk=run_id).first()
    return progress_html(run, every_cell=True) if run is not None else None


class TaskRunConsumer(LoopDispatch, AsyncWebsocketConsumer):
    group = ""
    run_id = 0

    async def connect(self) -> None:
        refusal = await database_sync_to_async(socket_refusal)(self.scope.get("user"), lambda user: has_role(user, VIEWER))
        if refusal is not None:
            await arefuse_socket(self, refusal)
            return
        run_id = int(self.scope["url_route"]["kwargs"]["pk"])
        self.group, self.run_id = run_group(run_id), run_id
        await self.channel_layer.group_add(self.group, self.channel_name)
        await sync_to_async(add_watcher)(run_id)  # frames are rendered while someone watches
        await self.accept()
        # What changed between the page's render and this socket's join is sent now.
        panel = await database_sync_to_async(_current_panel)(run_id)
        if panel is not None:
            await self.send(text_data=panel)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await sync_to_async(remove_watcher)(self.run_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens."""

    async def progress_update(self, event: dict) -> None:
        await self.send(text_data=event["html"])
