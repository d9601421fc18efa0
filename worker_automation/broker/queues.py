"""Counting and purging Celery queues directly in Redis, one list per priority."""

from __future__ import annotations

from collections.abc import Iterable

from redis.asyncio import Redis

from worker_automation.broker.celery_app import TRANSPORT_OPTIONS


def priority_keys(queue: str) -> list[str]:
    """Every Redis list holding ``queue``'s messages: the bare name is priority 0, then ``queue:N``."""
    separator: str = TRANSPORT_OPTIONS["sep"]
    steps: list[int] = TRANSPORT_OPTIONS["priority_steps"]
    return [queue if step == 0 else f"{queue}{separator}{step}" for step in steps]


async def queue_lengths(redis: Redis, queues: Iterable[str]) -> dict[str, int]:
    """The number of waiting messages per queue, all lists read in one round trip."""
    names = list(dict.fromkeys(queues))
    async with redis.pipeline(transaction=False) as pipe:
        for queue in names:
            for key in priority_keys(queue):
                pipe.llen(key)
        counts: list[int] = await pipe.execute()
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


async def purge_queue(redis: Redis, queue: str) -> int:
    """Drop every waiting message of ``queue``; returns how many priority lists were deleted."""
    deleted: int = await redis.delete(*priority_keys(queue))
    return deleted


async def waiting_messages(redis: Redis, queues: Iterable[str]) -> dict[str, list[bytes]]:
    """Every waiting message, list by list (head first), of ``queues``; empty lists left out."""
    keys = [key for queue in dict.fromkeys(queues) for key in priority_keys(queue)]
    async with redis.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.lrange(key, 0, -1)
        found: list[list[bytes]] = await pipe.execute()
    return {key: messages for key, messages in zip(keys, found, strict=True) if messages}


async def put_back(redis: Redis, messages: dict[str, list[bytes]]) -> int:
    """Append ``messages`` (as :func:`waiting_messages` gave them) to their lists, in order."""
    async with redis.pipeline(transaction=False) as pipe:
        for key, values in messages.items():
            pipe.rpush(key, *values)
        await pipe.execute()
    return sum(len(values) for values in messages.values())
