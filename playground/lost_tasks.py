"""Background work whose task the broker lost: handed to a worker again a few times, then failed.

Why: work a person waits on (a conversation's run, an evaluation, an MCP server's sync, a search
index build) is stored as a row and its task handed to Celery through Redis. When Redis restarts
without persistence (as the embedded one and most development setups run it) or a worker's
connection drops, a task still waiting in the queue, or fetched by a worker but not started, is gone;
its row would say "running", "queued" or "pending" forever.

Each app declares what it queues as a `Kind` (`watch(kind)`):
- `tasks`, the Celery task names that carry this work, and `key_of(args)`, the key a task's
  positional arguments carry (a run token, a row id, a catalog version);
- `unclaimed(grace)`: rows queued more than `grace` seconds ago (their request, or their last re-send)
  that no worker has claimed yet, as {row id: key};
- `lost(row id, key)`: under the row's lock, check it is still unclaimed and hand it over again, or
  fail it with a reason its page shows once AGENT_QUEUE_ATTEMPTS re-sends are used up; returns
  "requeued", "failed" or "" (claimed or changed meanwhile).
A `sweep` is a check that needs no broker, run every round: a permission prompt past its deadline is
denied by one (a countdown task would be lost with Redis, and takes its worker down with it); work
whose worker died (its heartbeat went stale: conversations/lease.py, playground/heartbeat.py) is
ended by others.

The rounds run on Celery beat: `make run` starts a beat process beside the worker (compose: the
`beat` service), which sends `background_round` every half AGENT_QUEUE_GRACE_SECONDS to any worker.
A round collects the unclaimed rows of every kind and, when there are some, asks the broker which
tasks it still holds: in the queue, or fetched by a worker within the grace (workers fetch only what
they start at once: CELERY_WORKER_DISABLE_PREFETCH). A task the broker holds is only waiting for a free
worker and is left alone. A row missing from the broker in two rounds running (a worker acknowledges
or fetches a task a moment before it claims the row) is handed to its kind's `lost`; what a round
found missing is kept in Redis for the next one, which may run on another worker. While the broker
does not answer nothing is decided (and beat cannot send rounds); once it is back, lost work is handed
over within two rounds (one grace). The row lock in `lost` makes one round act on a row, should two
overlap.

Why the broker is still read with Redis persistence on (AOF, appendfsync everysec: a restart delivers
what was queued): a Redis brought through REDIS_URL may keep nothing, fakeredis (the embedded fallback)
keeps nothing, a crash loses up to the last second, and only the broker can tell a task waiting for a
free worker from one that is gone. The one place that reads kombu's private layout is
`messages_the_broker_holds`: the default queue (CELERY_TASK_DEFAULT_QUEUE, where every task is sent)
is a list of JSON messages, tasks fetched but not yet acknowledged are in the `unacked` hash, with
their fetch time in `unacked_index` (kombu's Redis transport, 5.x).
"""
from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, transaction

from playground.celery_app import app
from playground.queueing import queue_task

logger = logging.getLogger(__name__)

UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # kombu's Redis transport defaults
REQUEUED, FAILED = "requeued", "failed"


class BrokerUnavailable(RuntimeError):
    """The broker could not be asked: decide nothing this round."""


@dataclass(frozen=True)
class Kind:
    name: str
    tasks: frozenset[str]
    key_of: Callable[[list[Any]], str]
    unclaimed: Callable[[float], dict[Any, str]]
    lost: Callable[[Any, str], str]


@dataclass(frozen=True)
class Sweep:
    name: str
    run: Callable[[], int]  # how many rows it settled


KINDS: dict[str, Kind] = {}
SWEEPS: dict[str, Sweep] = {}


def watch(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


def sweep(name: str, run: Callable[[], int]) -> Sweep:
    SWEEPS[name] = Sweep(name, run)
    return SWEEPS[name]


def grace_seconds() -> float:
    return float(settings.AGENT_QUEUE_GRACE_SECONDS)


def attempts_used(attempts: int) -> bool:
    """Whether a row's re-sends are used up (AGENT_QUEUE_ATTEMPTS): it is failed instead."""
    return attempts >= settings.AGENT_QUEUE_ATTEMPTS


def lost_reason(waited_seconds: float, attempts: int) -> str:
    """Why a row no worker took was failed, said the same way for every kind (its page adds what to do)."""
    tries = f", also after it was sent again {attempts} time(s)" if attempts else ""
    return (f"the message broker lost its task (was Redis restarted?) and no worker took it "
            f"within {int(waited_seconds)} s{tries}")


def send_again(task: str, *args: Any, what: str) -> None:
    """Hand the task named `task` to the broker again once the caller's transaction commits (the row
    says it was re-sent first). A broker that went away again is logged: the next round sends it once more."""
    def send() -> None:
        try:
            queue_task(task, *args)
        except Exception:
            logger.exception("could not send %s again", what)

    transaction.on_commit(send)


def first_arg(args: list[Any]) -> str:
    """The key of tasks whose first argument names their row (an id or a version)."""
    return str(args[0]) if args else ""


# -- the broker ------------------------------------------------------------------------------------
def task_of(raw: bytes | str) -> tuple[str, list[Any]] | None:
    """(task name, positional arguments) of a queued Celery message; None when it cannot be read."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # an `unacked` entry: [message, exchange, routing key]
            message = message[0]
        task = message.get("headers", {}).get("task")
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        if not isinstance(task, str) or not isinstance(args, list):
            return None
        return task, args
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def messages_the_broker_holds(broker_url: str, queue: str, grace: float) -> list[tuple[str, list[Any]]]:
    """The tasks waiting in `queue` or fetched by a worker less than `grace` seconds ago."""
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
    return [task for task in map(task_of, raws) if task is not None]


def held_keys(kinds: Iterable[Kind], grace: float) -> set[tuple[str, str]]:
    """(kind name, key) of every task of `kinds` the broker holds."""
    by_task = {task: kind for kind in kinds for task in kind.tasks}
    held = set()
    for task, args in messages_the_broker_holds(app.conf.broker_url, app.conf.task_default_queue, grace):
        kind = by_task.get(task)
        if kind is not None:
            try:
                held.add((kind.name, kind.key_of(args)))
            except (IndexError, TypeError, ValueError):
                continue
    return held


# -- one round -------------------------------------------------------------------------------------
Missing = dict[tuple[str, Any], str]  # (kind name, row id) → key


def missing_rows(kinds: list[Kind]) -> Missing:
    """Unclaimed rows past the grace whose task the broker does not hold."""
    grace = grace_seconds()
    candidates: Missing = {}
    for kind in kinds:
        try:
            rows = kind.unclaimed(grace)
        except DatabaseError:
            raise
        except Exception:
            logger.exception("%s: could not look for work no worker took", kind.name)
            continue
        candidates.update({(kind.name, row): key for row, key in rows.items()})
    if not candidates:
        return {}
    held = held_keys(kinds, grace)
    return {where: key for where, key in candidates.items() if (where[0], key) not in held}


def lost_round(missing_before: Missing, kinds: list[Kind] | None = None) -> tuple[dict[str, int], Missing]:
    """One round: hand to their kind's `lost` the rows missing now and in the round before under the
    same key. Why twice: a worker takes a task from the broker a moment before it claims the row, so
    a row seen missing once may just be starting; one missing a round later has not started.
    Returns what was done and the rows missing for the first time (for the next round)."""
    kinds = list(KINDS.values()) if kinds is None else kinds
    by_name = {kind.name: kind for kind in kinds}
    outcome = {REQUEUED: 0, FAILED: 0}
    missing = missing_rows(kinds)
    for (name, row), key in missing.items():
        if missing_before.get((name, row)) != key:
            continue
        try:
            done = by_name[name].lost(row, key)
        except Exception:
            logger.exception("%s %s: could not hand over work the broker lost", name, row)
            continue
        if done:
            outcome[done] += 1
            logger.warning("%s %s: no worker took it and the broker lost its task: %s", name, row, done)
    fresh = {where: key for where, key in missing.items() if missing_before.get(where) != key}
    return outcome, fresh


def run_sweeps(sweeps: Iterable[Sweep] | None = None) -> int:
    settled = 0
    for each in (SWEEPS.values() if sweeps is None else sweeps):
        try:
            settled += each.run()
        except Exception:
            logger.exception("%s: the sweep failed", each.name)
    return settled


# -- the round on Celery beat ---------------------------------------------------------------------
ROUND_TASK = "playground.background_round"


def round_interval() -> float:
    """Seconds between rounds: half AGENT_QUEUE_GRACE_SECONDS (Celery beat's schedule, settings.py)."""
    return float(settings.BACKGROUND_ROUND_SECONDS)


def _state_key() -> str:
    return f"playground:lost-work:{app.conf.task_default_queue}"


def _broker_client() -> redis.Redis:
    return redis.Redis.from_url(app.conf.broker_url, socket_connect_timeout=3, socket_timeout=10)


def remembered_missing() -> Missing:
    """The rows the previous round found missing (kept in the broker's Redis: any worker runs the next round)."""
    client = _broker_client()
    try:
        raw = client.get(_state_key())
    finally:
        client.close()
    try:
        return {(name, row): key for name, row, key in json.loads(raw)} if raw else {}
    except (ValueError, TypeError):
        return {}


def remember_missing(missing: Missing) -> None:
    client = _broker_client()
    try:
        # Forgotten after a few rounds without one: a row must be missing in two rounds close together.
        client.set(_state_key(), json.dumps([[name, row, key] for (name, row), key in missing.items()]),
                   ex=max(5, int(4 * round_interval())))
    finally:
        client.close()


def run_round() -> dict[str, int]:
    """One round: lost work (with the previous round's findings) and every sweep. What was done."""
    outcome = {REQUEUED: 0, FAILED: 0}
    try:
        outcome, missing = lost_round(remembered_missing())
        remember_missing(missing)
    except (BrokerUnavailable, redis.RedisError, OSError) as exc:
        logger.info("work no worker took: the broker does not answer (%s); looking again next round", exc)
    except DatabaseError:
        logger.warning("work no worker took: could not read the database", exc_info=True)
    except Exception:
        logger.exception("work no worker took: the round failed")
    outcome["settled"] = run_sweeps()
    return outcome


@app.task(name=ROUND_TASK, acks_late=False, ignore_result=True)
def background_round() -> dict[str, int]:
    """Sent by Celery beat every half AGENT_QUEUE_GRACE_SECONDS (settings.CELERY_BEAT_SCHEDULE); any
    worker runs it. Rounds are short: a few indexed reads, and the broker read only when a row is late."""
    return run_round()
