"""Row counts by (queue, status) from the trigger-maintained counters, and a full recount."""

from __future__ import annotations

from functools import cache

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.models import Job, JobCount
from worker_automation.models.database import Executor

CountKey = tuple[str, str]  # (queue, status)


_COUNTERS = select(JobCount.queue, JobCount.status, JobCount.n)


async def counters(session: Executor) -> dict[CountKey, int]:
    """Every non-empty (queue, status) pair: a read of a few dozen rows, whatever the table size."""
    rows = await session.execute(_COUNTERS)
    return {(q, s): int(n) for q, s, n in rows if n}


async def recount(session: AsyncSession) -> dict[CountKey, int]:
    """The same figures by scanning ``workers`` (to check the counters never drift)."""
    rows = await session.execute(select(Job.queue, Job.status, func.count()).group_by(Job.queue, Job.status))
    return {(q, s): int(n) for q, s, n in rows if n}


@cache
def counted_total(columns: tuple[str, ...], prefix: str = "") -> Select[int]:
    """The counters' total of the rows whose ``columns`` (status and/or queue) equal the
    parameters ``<prefix><column>``: one statement per combination, built once."""
    return select(func.coalesce(func.sum(JobCount.n), 0)).where(
        *(getattr(JobCount, name) == bindparam(prefix + name) for name in columns)
    )


async def count_matching(session: Executor, *, status: str | None, queue: str | None) -> int:
    """Rows with ``status`` and/or ``queue`` (None = any), from the counters."""
    parameters = {name: value for name, value in (("status", status), ("queue", queue)) if value is not None}
    return int(await session.scalar(counted_total(tuple(parameters)), parameters) or 0)
