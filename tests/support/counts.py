"""Full recounts of ``workers``, and every bucket counter at once: what the tests compare the
trigger-maintained counters with, to check they never drift (the package reads only the counters
it needs)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.models import BUCKET_BITS, FinishedCount, Job, JobBucketCount, JobStatus, QueuedCount
from worker_automation.models.database import Executor
from worker_automation.resolvers.counts import SLOT_SECONDS, BucketKey, CountKey


async def recount(session: AsyncSession) -> dict[CountKey, int]:
    """Every non-empty (queue, status) pair, by scanning ``workers``."""
    rows = await session.execute(select(Job.queue, Job.status, func.count()).group_by(Job.queue, Job.status))
    return {(q, s): int(n) for q, s, n in rows if n}


async def bucket_counters(session: Executor) -> dict[BucketKey, int]:
    """Every non-empty (queue, status, bucket) of ``worker_bucket_counts``."""
    rows = await session.execute(
        select(JobBucketCount.queue, JobBucketCount.status, JobBucketCount.bucket, JobBucketCount.n)
    )
    return {(q, s, b): int(n) for q, s, b, n in rows if n}


async def bucket_recount(session: AsyncSession) -> dict[BucketKey, int]:
    """The same figures by scanning ``workers`` (the bucket of an id is ``id >> BUCKET_BITS``)."""
    bucket = Job.id.op(">>")(BUCKET_BITS)
    rows = await session.execute(
        select(Job.queue, Job.status, bucket, func.count()).group_by(Job.queue, Job.status, bucket)
    )
    return {(q, s, int(b)): int(n) for q, s, b, n in rows if n}


async def queued_counters(session: Executor) -> dict[tuple[str, int], int]:
    """Every non-empty (queue, priority) of ``queued_counts``."""
    rows = await session.execute(select(QueuedCount.queue, QueuedCount.priority, QueuedCount.n))
    return {(q, p): int(n) for q, p, n in rows if n}


async def queued_recount(session: AsyncSession) -> dict[tuple[str, int], int]:
    """The same figures by scanning ``workers``."""
    rows = await session.execute(
        select(Job.queue, Job.priority, func.count())
        .where(Job.status == JobStatus.AGENDADO.value)
        .group_by(Job.queue, Job.priority)
    )
    return {(q, int(p)): int(n) for q, p, n in rows if n}


async def finished_counters(session: Executor) -> dict[tuple[int, str, str], int]:
    """Every non-empty (slot, queue, status) of ``finished_counts``."""
    rows = await session.execute(
        select(FinishedCount.slot, FinishedCount.queue, FinishedCount.status, FinishedCount.n)
    )
    return {(int(slot), q, s): int(n) for slot, q, s, n in rows if n}


async def finished_recount(session: AsyncSession) -> dict[tuple[int, str, str], int]:
    """The same figures from every finished row, each slot worked out here from ``data_fim``."""
    found: dict[tuple[int, str, str], int] = {}
    rows = await session.execute(select(Job.data_fim, Job.queue, Job.status).where(Job.data_fim.is_not(None)))
    for finished, queue, status in rows:
        assert finished is not None
        key = (int(finished.timestamp()) // SLOT_SECONDS, queue, status)
        found[key] = found.get(key, 0) + 1
    return found
