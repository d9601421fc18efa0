"""Feeding no-op jobs through the API and waiting for them: what the throughput benchmarks share.

The queue and automation they use (``scan``, ``demo.echo``), emptying that queue in the
benchmarks' Redis database, creating jobs one per request or in batches with the workers' lean
HTTP client, and counting the jobs that reached CONCLUIDO.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import asyncpg
import redis

from bench.common import pg_url, redis_url
from worker_automation.worker.http import HttpClient

QUEUE = "scan"
AUTOMATION = "demo.echo"
# How long a benchmark waits for its jobs to reach CONCLUIDO.
TIMEOUT_SECONDS = 900.0


def purge(queue: str) -> None:
    """Empty ``queue``'s priority lists in the benchmarks' Redis database (nothing else)."""
    client = redis.Redis.from_url(redis_url())
    try:
        client.delete(queue, *(f"{queue}:{n}" for n in range(1, 10)))
    finally:
        client.close()


async def connect(database: str) -> asyncpg.Connection:
    """A connection to ``database``, waiting (up to a minute) while the shared server has no free
    connection slot: other programs on the machine may hold them for a moment."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await asyncpg.connect(pg_url(database))
        except asyncpg.TooManyConnectionsError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def dispatch_all(
    api_url: str, key: str, jobs: int, in_flight: int, batch: int = 1
) -> tuple[float, float, int]:
    """Create ``jobs`` jobs with ``in_flight`` concurrent requests, one job per
    ``POST /api/v1/jobs`` or, with ``batch`` > 1, up to ``batch`` per ``POST /api/v1/jobs/batch``;
    (wall start, seconds, jobs not created).

    Sent with the workers' lean HTTP client, one keep-alive connection per sender: the load
    generator shares the two cores and must not cost more than the API it feeds.
    """
    errors = 0
    remaining = jobs

    async def sender() -> None:
        nonlocal remaining, errors
        client = HttpClient(api_url, {"X-API-Key": key}, timeout=60)
        try:
            while remaining > 0:
                size = min(batch, remaining)
                remaining -= size
                items = [
                    {"automation_type": AUTOMATION, "context": {"n": remaining + i}, "priority": 0}
                    for i in range(size)
                ]
                if batch == 1:
                    response = await client.request("POST", "/api/v1/jobs", json_body=items[0])
                else:
                    response = await client.request("POST", "/api/v1/jobs/batch", json_body={"jobs": items})
                if response.status_code != 201:
                    errors += size
                    if errors <= 3 * size:
                        print(f"dispatch error {response.status_code}: {response.text[:300]}", flush=True)
        finally:
            await client.close()

    started = time.time()
    t0 = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(in_flight)))
    return started, time.perf_counter() - t0, errors


async def wait_concluded(database: str, first_id: int, jobs: int) -> int:
    conn = await connect(database)
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        done = 0
        while time.monotonic() < deadline:
            done = int(
                await conn.fetchval(
                    "SELECT count(*) FROM workers WHERE id > $1 AND status = 'CONCLUIDO'", first_id
                )
            )
            if done >= jobs:
                break
            await asyncio.sleep(0.25)
        return done
    finally:
        await conn.close()


async def job_times(database: str, first_id: int) -> list[tuple[datetime, datetime]]:
    conn = await connect(database)
    try:
        rows = await conn.fetch(
            "SELECT created_at, data_fim FROM workers WHERE id > $1 AND status = 'CONCLUIDO'", first_id
        )
        return [(r["created_at"], r["data_fim"]) for r in rows]
    finally:
        await conn.close()


async def last_id(database: str) -> int:
    conn = await connect(database)
    try:
        return int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM workers"))
    finally:
        await conn.close()
