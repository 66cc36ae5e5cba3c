"""Celery task: one run of the agent loop per person's message (the loop itself lives in loop.py)."""
from __future__ import annotations

from playground.celery_app import app


@app.task(name="conversations.run_conversation", acks_late=False)
def run_conversation_task(conversation_id: int) -> str:
    # acks_late off: a redelivered run would repeat tool calls that already happened.
    from playground.conversations.loop import run_conversation

    return run_conversation(conversation_id).reason
