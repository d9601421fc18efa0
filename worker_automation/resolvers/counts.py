"""Row counts by (queue, status), by bucket of ids and by hour of finish time, from the
trigger-maintained counters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Select, bindparam, cast, func, select

from worker_automation.models import BUCKET_IDS, FinishedCount, Job, JobBucketCount, JobCount
from worker_automation.models.base import UtcDateTime
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


# The seconds of one slot of ``finished_counts`` (migration 0017), and slot numbers past any real one.
SLOT_SECONDS = 3600
_NO_SLOT_BELOW, _NO_SLOT_ABOVE = -(2**31), 2**31 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@cache
def finished_total(columns: tuple[str, ...], prefix: str = "") -> Select[int]:
    """How many rows whose ``columns`` (status and/or queue) equal the parameters
    ``<prefix><column>`` finished in a range given by :func:`finished_parameters`: the counters of
    the hours it covers whole, plus a count of its rows in the two parts of an hour at its ends
    (each at most one hour of rows, through the index on ``data_fim``), whatever the range's
    length. One statement per combination, built once."""
    slots = select(func.coalesce(func.sum(FinishedCount.n), 0)).where(
        FinishedCount.slot >= bindparam("slots_from"),
        FinishedCount.slot < bindparam("slots_to"),
        *(getattr(FinishedCount, name) == bindparam(prefix + name) for name in columns),
    )

    def edge(start: str, end: str) -> Select[int]:
        return (
            select(func.count())
            .select_from(Job)
            .where(
                Job.data_fim >= bindparam(start, type_=UtcDateTime()),
                Job.data_fim < bindparam(end, type_=UtcDateTime()),
                *(getattr(Job, name) == bindparam(prefix + name) for name in columns),
            )
        )

    parts = [
        cast(slots.scalar_subquery(), BigInteger),
        edge("head_from", "head_to").scalar_subquery(),
        edge("tail_from", "tail_to").scalar_subquery(),
    ]
    return select(parts[0] + parts[1] + parts[2])


def finished_parameters(start: datetime | None, end: datetime | None) -> dict[str, Any]:
    """The parameters of :func:`finished_total` for the rows that finished at or after ``start``
    and before ``end`` (None: unbounded on that side): the whole slots ``[slots_from, slots_to)``,
    the head ``[start, first whole slot)`` and the tail ``[end of the last whole slot, end)``, the
    three disjoint."""
    step = timedelta(seconds=SLOT_SECONDS)
    empty = {"head_from": _EPOCH, "head_to": _EPOCH}
    if start is None:
        slots_from, head = _NO_SLOT_BELOW, empty
        whole_from = None
    else:
        slots_from = -((_EPOCH - start) // step)
        whole_from = _EPOCH + slots_from * step
        head = {"head_from": start, "head_to": whole_from if end is None else min(whole_from, end)}
    if end is None:
        slots_to, tail = _NO_SLOT_ABOVE, {"tail_from": _EPOCH, "tail_to": _EPOCH}
    else:
        slots_to = (end - _EPOCH) // step
        tail_from = _EPOCH + slots_to * step
        if whole_from is not None:
            tail_from = max(tail_from, whole_from)
        tail = {"tail_from": tail_from, "tail_to": end}
    return {"slots_from": slots_from, "slots_to": slots_to, **head, **tail}


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
