"""Row counts by (queue, status), by bucket of ids and by hour of finish time, from the
trigger-maintained counters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Integer, Select, bindparam, cast, func, select

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
    a run of whole hours, plus or minus a count of the rows of a part of an hour at each end
    (through the index on ``data_fim``), whatever the range's length. One statement per
    combination, built once."""
    slots = select(func.coalesce(func.sum(FinishedCount.n), 0)).where(
        FinishedCount.slot >= bindparam("slots_from"),
        FinishedCount.slot < bindparam("slots_to"),
        *(getattr(FinishedCount, name) == bindparam(prefix + name) for name in columns),
    )

    def edge(name: str) -> ColumnElement[int]:
        counted = (
            select(func.count())
            .select_from(Job)
            .where(
                Job.data_fim >= bindparam(f"{name}_from", type_=UtcDateTime()),
                Job.data_fim < bindparam(f"{name}_to", type_=UtcDateTime()),
                *(getattr(Job, column) == bindparam(prefix + column) for column in columns),
            )
        )
        return bindparam(f"{name}_sign", type_=Integer()) * counted.scalar_subquery()

    return select(cast(slots.scalar_subquery(), BigInteger) + edge("head") + edge("tail"))


def finished_parameters(start: datetime | None, end: datetime | None) -> dict[str, Any]:
    """The parameters of :func:`finished_total` for the rows that finished at or after ``start``
    and before ``end`` (None: unbounded on that side).

    The hours the range covers whole are the slots ``[slots_from, slots_to)``; the head is
    ``[start, first whole hour)`` and the tail ``[end of the last whole hour, end)``, counted and
    added. An end that cuts an hour the range otherwise covers is counted from the nearer side of
    that hour instead: the hour's counter is added and the rows on its other side subtracted
    (at 10M rows an hour holds about 13,000 of them; the bound of a range typed by a person or
    set to "now" falls anywhere in it, so this counts a quarter of an hour on average instead of
    a half)."""
    step = timedelta(seconds=SLOT_SECONDS)
    nothing = {"from": _EPOCH, "to": _EPOCH, "sign": 1}
    head, tail = dict(nothing), dict(nothing)
    whole_from: datetime | None = None
    if start is None:
        slots_from = _NO_SLOT_BELOW
    else:
        slots_from = -((_EPOCH - start) // step)
        whole_from = _EPOCH + slots_from * step
        head.update({"from": start, "to": whole_from if end is None else min(whole_from, end)})
        cut = whole_from - step
        # The hour ``start`` cuts, all of it in the range but for its rows before ``start``.
        if start > cut and (end is None or end >= whole_from) and start - cut < whole_from - start:
            slots_from -= 1
            head = {"from": cut, "to": start, "sign": -1}
    if end is None:
        slots_to = _NO_SLOT_ABOVE
    else:
        slots_to = (end - _EPOCH) // step
        tail_from = _EPOCH + slots_to * step
        whole = whole_from is None or tail_from >= whole_from
        if whole_from is not None:
            tail_from = max(tail_from, whole_from)
        tail.update({"from": tail_from, "to": end})
        # The hour ``end`` cuts, all of it in the range but for its rows from ``end`` on.
        if whole and end > tail_from and (tail_from + step) - end < end - tail_from:
            slots_to += 1
            tail = {"from": end, "to": tail_from + step, "sign": -1}
    return {
        "slots_from": slots_from,
        "slots_to": slots_to,
        **{f"head_{name}": value for name, value in head.items()},
        **{f"tail_{name}": value for name, value in tail.items()},
    }


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
