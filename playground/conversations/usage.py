"""Learning from usage, the Django side: record which tools past ToolSearch queries led to, and
hand the engine the log its BM25 backends index as each tool's "usage" field.

The engine decides what counts as evidence (`engine.search.usage.usage_pairs`); this module stores
it per conversation (deleting a conversation forgets what it taught) and reads it back, cached by
a version so a search costs one small aggregate query. `TOOLSEARCH_LEARN_FROM_USAGE=false` turns
both recording and use off.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import Count, Max

from playground.conversations.models import Message, ToolSearchUsage
from playground.engine.search.usage import UsageLog, usage_pairs
from playground.registry import adapter

logger = logging.getLogger(__name__)

MAX_QUERY_CHARS = 1000  # longer queries are stored cut: a pasted document is not a search habit

_lock = threading.Lock()
_cache: tuple[tuple, UsageLog] | None = None


def learning_enabled() -> bool:
    return bool(settings.TOOLSEARCH_LEARN_FROM_USAGE)


def record_usage(conversation_id: int, messages: Sequence[dict[str, Any]]) -> int:
    """Store the (query, tool) evidence in `messages`; pairs already stored are skipped. Returns
    how many pairs the messages hold."""
    if not learning_enabled():
        return 0
    pairs = usage_pairs(messages)
    rows = []
    for query, tool in pairs:
        query = " ".join(query.split())[:MAX_QUERY_CHARS]
        rows.append(ToolSearchUsage(
            conversation_id=conversation_id, query=query, tool_name=tool[:255],
            query_hash=hashlib.sha1(query.encode("utf-8")).hexdigest(),
        ))
    if rows:
        ToolSearchUsage.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def record_usage_safely(conversation_id: int, messages: Sequence[dict[str, Any]]) -> None:
    """`record_usage` for the end of a run: learning must never turn a finished run into a failed one."""
    try:
        record_usage(conversation_id, messages)
    except Exception:
        logger.exception("conversation %s: could not record ToolSearch usage", conversation_id)


def record_conversation_usage(conversation_id: int) -> None:
    """After a run: learn from the conversation's whole history, compacted messages included (a
    search before a compaction still led to its calls)."""
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("position").values_list("role", "content")
    record_usage_safely(conversation_id, [{"role": role, "content": content} for role, content in rows])


def usage_version() -> tuple:
    row = ToolSearchUsage.objects.aggregate(count=Count("id"), latest=Max("id"))
    return (row["count"], row["latest"])


def usage_log() -> UsageLog | None:
    """The deployment's usage log (the most recent `TOOLSEARCH_USAGE_MAX_ENTRIES` pieces of
    evidence), or None when learning is off or nothing was learned yet."""
    global _cache
    if not learning_enabled():
        return None
    version = usage_version()
    if version[0] == 0:
        return None
    with _lock:
        if _cache is not None and _cache[0] == version:
            return _cache[1]
    newest = ToolSearchUsage.objects.order_by("-id").values_list("query", "tool_name")[: settings.TOOLSEARCH_USAGE_MAX_ENTRIES]
    log = adapter.usage_log(reversed(list(newest)))
    with _lock:
        _cache = (version, log)
    return log


def reset_usage_cache() -> None:
    """For tests: a rolled-back transaction can bring back an old (count, latest id) version."""
    global _cache
    with _lock:
        _cache = None


def queries_for_tool(tool_name: str, *, user=None, limit: int = 25) -> list[ToolSearchUsage]:
    """The most recent evidence for one tool, newest first (the tool page); with `user`, only
    from that person's conversations."""
    rows = ToolSearchUsage.objects.filter(tool_name=tool_name)
    if user is not None:
        rows = rows.filter(conversation__owner=user)
    return list(rows.select_related("conversation").order_by("-id")[:limit])


def forget_usage() -> int:
    """Delete everything learned (an admin action); returns how many pieces of evidence went."""
    deleted, _ = ToolSearchUsage.objects.all().delete()
    return deleted
