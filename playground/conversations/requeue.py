"""Runs no worker took: a run whose task the broker lost is handed over again, a few times, then failed.

Why: a person's message is stored and its run handed to Celery through Redis. When Redis restarts
(without persistence, as the embedded one and most development setups run it) or a worker's
connection drops, a task still waiting in the queue, or one a worker had fetched but not started, is
gone; its conversation would stay "running" and refuse new messages. A run that a worker claimed has
a heartbeat (lease.py); one that none claimed has `heartbeat_at` empty and `queued_at` set.

The watch: every worker runs a thread (started when the worker is ready, stopped at its shutdown)
that, every half grace, looks for runs still unclaimed AGENT_QUEUE_GRACE_SECONDS after they were
queued (the person's request, or the last re-send: never a later event). For those it asks the broker
whether it still holds their task: in the queue, or fetched by a worker within the grace (workers
fetch only what they start at once: CELERY_WORKER_DISABLE_PREFETCH). A task the broker holds is only
waiting for a free worker and is left alone. A run missing from the broker in two rounds running
(a worker acknowledges a task a moment before it claims the run) is handed over again under a new run
token (`services.requeue_unclaimed_run`), at most AGENT_QUEUE_ATTEMPTS times, and then failed with an
error the page shows. While the broker does not answer nothing is decided; once it is back, lost runs
are handed over within two rounds (one grace).

Only the default queue (CELERY_TASK_DEFAULT_QUEUE, where `services.queue_run` sends) and kombu's Redis
layout are read: the queue is a list of JSON messages, tasks fetched but not yet acknowledged are in
the `unacked` hash, with their fetch time in `unacked_index`.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
from datetime import timedelta

import redis
from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from playground.celery_app import app
from playground.conversations.models import Conversation
from playground.conversations.services import requeue_unclaimed_run

logger = logging.getLogger(__name__)

RUN_TASKS = {"conversations.run_conversation", "conversations.resume_conversation"}
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # kombu's Redis transport defaults


class BrokerUnavailable(RuntimeError):
    """The broker could not be asked: decide nothing this round."""


def unclaimed_runs(grace: float | None = None) -> dict[int, str]:
    """Runs still unclaimed `grace` seconds after they were queued: conversation id → run token."""
    grace = settings.AGENT_QUEUE_GRACE_SECONDS if grace is None else grace
    cutoff = timezone.now() - timedelta(seconds=grace)
    rows = (Conversation.objects.filter(status=Conversation.Status.RUNNING, heartbeat_at__isnull=True, queued_at__lt=cutoff)
            .exclude(run_token="").values_list("pk", "run_token"))
    return dict(rows)


def run_token_of(raw: bytes | str) -> str:
    """The run token a queued Celery message carries ("" for other tasks or an unreadable message)."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # an `unacked` entry: [message, exchange, routing key]
            message = message[0]
        if message.get("headers", {}).get("task") not in RUN_TASKS:
            return ""
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return str(args[1]) if len(args) > 1 else ""
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return ""


def tokens_the_broker_holds(broker_url: str, queue: str, grace: float) -> set[str]:
    """Run tokens of tasks waiting in `queue` or fetched by a worker less than `grace` seconds ago."""
    if not broker_url.startswith(("redis://", "rediss://", "unix://")):
        raise BrokerUnavailable(f"cannot look into a non-Redis broker ({broker_url.split(':', 1)[0]})")
    client = redis.Redis.from_url(broker_url, socket_connect_timeout=3, socket_timeout=10)
    try:
        raws = list(client.lrange(queue, 0, -1))
        fresh = client.zrangebyscore(UNACKED_INDEX, time.time() - grace, "+inf")
        if fresh:
            raws.extend(raw for raw in client.hmget(UNACKED, fresh) if raw)
    except (redis.RedisError, OSError) as exc:
        raise BrokerUnavailable(str(exc)) from exc
    finally:
        client.close()
    return {token for token in map(run_token_of, raws) if token}


def missing_runs() -> dict[int, str]:
    """Unclaimed runs past the grace whose task the broker does not hold: conversation id → run token."""
    grace = settings.AGENT_QUEUE_GRACE_SECONDS
    candidates = unclaimed_runs(grace)
    if not candidates:
        return {}
    held = tokens_the_broker_holds(app.conf.broker_url, app.conf.task_default_queue, grace)
    return {conversation_id: token for conversation_id, token in candidates.items() if token not in held}


def requeue_lost_runs(missing_before: dict[int, str]) -> tuple[dict[str, int], dict[int, str]]:
    """One round: hand over again (or fail) the runs missing now and in the round before, under the
    same token. Why twice: a worker acknowledges a task a moment before its lease claims the run, so a
    run seen missing once may just be starting; one missing a round later has not started.
    Returns what was done and the runs missing for the first time (for the next round)."""
    outcome = {"requeued": 0, "failed": 0}
    missing = missing_runs()
    for conversation_id, token in missing.items():
        if missing_before.get(conversation_id) != token:
            continue
        done = requeue_unclaimed_run(conversation_id, token)
        if done:
            outcome[done] += 1
            logger.warning("conversation %s: no worker took its run and the broker lost the task: %s",
                           conversation_id, done)
    fresh = {c: t for c, t in missing.items() if missing_before.get(c) != t}
    return outcome, fresh


class RequeueWatch:
    """The worker's thread running `requeue_lost_runs` every half grace until `stop()`."""

    def __init__(self, interval: float | None = None) -> None:
        self.interval = interval if interval is not None else max(0.5, settings.AGENT_QUEUE_GRACE_SECONDS / 2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="requeue-watch", daemon=True)
        self.rounds = 0

    def start(self) -> RequeueWatch:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    def _watch(self) -> None:
        try:
            missing: dict[int, str] = {}
            while True:
                try:
                    _, missing = requeue_lost_runs(missing)
                except BrokerUnavailable as exc:
                    missing = {}  # nothing is known about the broker's queue now: look twice again
                    logger.info("runs no worker took: the broker does not answer (%s); looking again soon", exc)
                except DatabaseError:
                    logger.warning("runs no worker took: could not read the database", exc_info=True)
                except Exception:  # noqa: BLE001 - the watch must outlive one bad round
                    logger.exception("runs no worker took: the round failed")
                self.rounds += 1
                connections.close_all()  # this thread's own connections, fresh each round
                if self._stop.wait(self.interval):
                    return
        finally:
            connections.close_all()
