"""Row counts by (queue, status), and by bucket of ids, from the trigger-maintained counters."""

from __future__ import annotations

from functools import cache

from sqlalchemy import BigInteger, ColumnElement, Select, bindparam, cast, func, select

from worker_automation.models import BUCKET_IDS, Job, JobBucketCount, JobCount
from worker_automation.models.database import Executor

CountKey = tuple[str, str]  # (queue, status)
BucketKey = tuple[str, str, int]  # (queue, status, bucket)


_COUNTERS = select(JobCount.queue, JobCount.status, JobCount.n)


async def counters(session: Executor) -> dict[CountKey, int]:
    """Every non-empty (queue, status) pair: a read of a few dozen rows, whatever the table size."""
    rows = await session.execute(_COUNTERS)
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


@cache
def bucketed_seek(
    columns: tuple[str, ...], prefix: str, offset: str
) -> tuple[ColumnElement[bool], ColumnElement[int]]:
    """Where the ``<offset>``-th newest row (from 0) whose ``columns`` (status and/or queue) equal
    the parameters ``<prefix><column>`` lies, from the bucket counters: a condition on ``Job.id``
    (below the end of the bucket that row is in) and how many matching rows of that bucket come
    before it (to skip). A page read with both skips at most one bucket's entries instead of
    ``offset`` of them. Read in the page's own statement, the counters and the rows are of one
    snapshot, so the page is the one plain ``OFFSET`` would give. Past the last row the condition
    matches nothing."""
    filters = [getattr(JobBucketCount, name) == bindparam(prefix + name) for name in columns]
    per_bucket = (
        select(JobBucketCount.bucket, func.sum(JobBucketCount.n).label("n"))
        .where(*filters)
        .group_by(JobBucketCount.bucket)
        .subquery("per_bucket")
    )
    # Rows in this bucket and every newer one: the first bucket where that passes the offset
    # holds the row.
    running = select(
        per_bucket.c.bucket,
        per_bucket.c.n,
        func.sum(per_bucket.c.n).over(order_by=per_bucket.c.bucket.desc()).label("upto"),
    ).subquery("running")
    start = (
        select(
            running.c.bucket,
            cast(bindparam(offset) - (running.c.upto - running.c.n), BigInteger).label("skip"),
        )
        .where(running.c.upto > bindparam(offset))
        .order_by(running.c.bucket.desc())
        .limit(1)
        .cte("page_start")
    )
    # In bigint: the end of the last bucket of 32-bit ids is 2**31.
    below = Job.id < (cast(select(start.c.bucket).scalar_subquery(), BigInteger) + 1) * BUCKET_IDS
    skip = func.coalesce(select(start.c.skip).scalar_subquery(), 0)
    return below, skip
