"""Row counts by (queue, status) from the trigger-maintained counters, and a full recount."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.models import Worker, WorkerCount

CountKey = tuple[str, str]  # (queue, status)


async def counters(session: AsyncSession) -> dict[CountKey, int]:
    """Every non-empty (queue, status) pair: a read of a few dozen rows, whatever the table size."""
    rows = await session.execute(select(WorkerCount.queue, WorkerCount.status, WorkerCount.n))
    return {(q, s): int(n) for q, s, n in rows if n}


async def recount(session: AsyncSession) -> dict[CountKey, int]:
    """The same figures by scanning ``workers`` (to check the counters never drift)."""
    rows = await session.execute(
        select(Worker.queue, Worker.status, func.count()).group_by(Worker.queue, Worker.status)
    )
    return {(q, s): int(n) for q, s, n in rows if n}


async def count_matching(session: AsyncSession, *, status: str | None, queue: str | None) -> int:
    """Rows with ``status`` and/or ``queue`` (None = any), from the counters."""
    query = select(func.coalesce(func.sum(WorkerCount.n), 0))
    if status is not None:
        query = query.where(WorkerCount.status == status)
    if queue is not None:
        query = query.where(WorkerCount.queue == queue)
    return int(await session.scalar(query) or 0)
