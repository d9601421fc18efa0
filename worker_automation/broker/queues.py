"""Counting and purging Celery queues directly in Redis, one list per priority."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from worker_automation.broker.celery_app import TRANSPORT_OPTIONS


def priority_keys(queue: str) -> list[str]:
    """Every Redis list holding ``queue``'s messages: the bare name is priority 0, then ``queue:N``."""
    separator: str = TRANSPORT_OPTIONS["sep"]
    steps: list[int] = TRANSPORT_OPTIONS["priority_steps"]
    return [queue if step == 0 else f"{queue}{separator}{step}" for step in steps]


# The lengths of every list in KEYS, in one command: a pipeline of one LLEN per priority list
# (ten per queue) cost more CPU to write and read back than the dashboard's database reads.
_LENGTHS_SCRIPT = "local n = {} for i, key in ipairs(KEYS) do n[i] = redis.call('LLEN', key) end return n"
_LENGTHS_SHA = hashlib.sha1(_LENGTHS_SCRIPT.encode()).hexdigest()


async def queue_lengths(redis: Redis, queues: Iterable[str]) -> dict[str, int]:
    """The number of waiting messages per queue, all lists read in one command."""
    names = list(dict.fromkeys(queues))
    keys = [key for queue in names for key in priority_keys(queue)]
    try:
        counts: list[int] = await redis.evalsha(_LENGTHS_SHA, len(keys), *keys)
    except NoScriptError:
        counts = await redis.eval(_LENGTHS_SCRIPT, len(keys), *keys)
    per_queue = len(TRANSPORT_OPTIONS["priority_steps"])
    return {queue: sum(counts[i * per_queue : (i + 1) * per_queue]) for i, queue in enumerate(names)}


async def priority_lengths(redis: Redis, queues: Iterable[str]) -> dict[str, list[int]]:
    """Waiting messages per queue and priority step (index = priority), in one round trip."""
    names = list(dict.fromkeys(queues))
    async with redis.pipeline(transaction=False) as pipe:
        for queue in names:
            for key in priority_keys(queue):
                pipe.llen(key)
        counts: list[int] = await pipe.execute()
    per_queue = len(TRANSPORT_OPTIONS["priority_steps"])
    return {queue: counts[i * per_queue : (i + 1) * per_queue] for i, queue in enumerate(names)}


@dataclass(frozen=True)
class Purged:
    """What a purge took out of the broker."""

    lists_deleted: int
    task_ids: frozenset[str]


async def purge_queue(redis: Redis, queue: str) -> Purged:
    """Drop every waiting message of ``queue``: the lists deleted and the task ids they carried.

    The lists are read and deleted in one transaction, so a message sent meanwhile is either
    among those named or still waiting.
    """
    keys = priority_keys(queue)
    async with redis.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.lrange(key, 0, -1)
        pipe.delete(*keys)
        *found, deleted = await pipe.execute()
    ids = frozenset(task_id for messages in found for raw in messages if (task_id := task_id_of(raw)))
    return Purged(int(deleted), ids)


async def waiting_task_ids(redis: Redis, queues: Iterable[str]) -> set[str]:
    """The task ids of every message waiting in ``queues`` (all priority lists, one round trip)."""
    keys = [key for queue in dict.fromkeys(queues) for key in priority_keys(queue)]
    async with redis.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.lrange(key, 0, -1)
        found: list[list[bytes]] = await pipe.execute()
    ids: set[str] = set()
    for messages in found:
        for raw in messages:
            task_id = task_id_of(raw)
            if task_id is not None:
                ids.add(task_id)
    return ids


def task_id_of(raw: bytes) -> str | None:
    """The task id of a message as kombu stores it in Redis (None when it is not one of ours)."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    headers = message.get("headers") if isinstance(message, dict) else None
    task_id = headers.get("id") if isinstance(headers, dict) else None
    return task_id if isinstance(task_id, str) else None
