"""Sums of the rollups per bucket of whole days, read from the daily rollups where it can.

A bucket of whole days on a zone's clock (a day, a week) starts at the same time of UTC day in
every bucket (``boundary``): the zone's midnight. A UTC day then lies in one bucket except for the
quarter hours on one side of that boundary. So such a range is read as: the UTC days, each counted
whole in the bucket of its larger part; the quarter hours of each day's smaller part, moved from
that bucket to their own; the quarter hours before the first whole UTC day and after the last,
in their own buckets. For America/Sao_Paulo (UTC-3) that is a day's row plus its first twelve
quarter hours instead of ninety-six quarter hours. Counts are the same either way, read off the
same triggers' sums.

Buckets are numbered ``(slot * SLOT_SECONDS + offset) // width``, as the callers number them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Executable,
    Integer,
    Select,
    Table,
    and_,
    cast,
    func,
    literal,
    null,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from worker_automation.models.rollup import (
    DAY_SECONDS,
    DAY_SLOTS,
    SLOT_SECONDS,
    automation_rollups,
    automation_rollups_daily,
)

# Ranges of fewer UTC days read the quarter hours alone: a month of one automation's quarter hours
# is a few thousand rows, read in about the time it takes to build and run the statement of the
# three parts (measured at a million jobs: automationHealth over 30 days took twice the API's
# CPU through the days, throughput over 90 days a third of its time).
LONG_RANGE_DAYS = 45
# Past any slot or day: the open end of a range of one automation's keys.
_NO_END: Final = 2**31 - 1


@dataclass(frozen=True)
class Scope:
    """Which rollups a read sums: one automation's, one queue's, both or all."""

    automation: str | None = None
    queue: str | None = None

    def between(
        self, table: Table, key: str, low: int | ColumnElement[Any], high: int | ColumnElement[Any] | None
    ) -> list[ColumnElement[bool]]:
        """The rows of this scope whose ``key`` (the slot or the day) is from ``low`` to ``high``
        (exclusive; None: open).

        One automation's range is also written as a range of the primary key's leading columns:
        even in the generic plan of a prepared statement, which is made without the values, that
        reads the automation's stretch of the primary key and nothing else, where the key's own
        index (every automation's rows of the range) would otherwise be a candidate. The equality
        stays for the planner's estimate of the rows."""
        column = table.c[key]
        conds = self.matching(table)
        if self.automation is not None:
            keys, name = tuple_(table.c.automation_type, column), literal(self.automation)
            end = literal(_NO_END) if high is None else high
            conds += [keys >= tuple_(name, low), keys < tuple_(name, end)]
        else:
            conds.append(column >= low)
            if high is not None:
                conds.append(column < high)
        return conds

    def matching(self, table: Table) -> list[ColumnElement[bool]]:
        """The rows of this scope, whatever their slot or day."""
        conds: list[ColumnElement[bool]] = []
        if self.automation is not None:
            conds.append(table.c.automation_type == self.automation)
        if self.queue is not None:
            conds.append(table.c.queue == self.queue)
        return conds


class _day_parts(FunctionElement[bool]):
    """Whether a slot is one of the slots ``low`` to ``high`` (exclusive) of a UTC day from
    ``first_day`` to ``end_day`` (exclusive): on PostgreSQL a list of slots the index looks up
    one by one (a few thousand rows of the tens of thousands the range holds), elsewhere a test
    of each slot of the range."""

    type = Boolean()
    inherit_cache = True


@compiles(_day_parts)
def _day_parts_default(element: _day_parts, compiler: SQLCompiler, **kw: Any) -> str:
    slot, first_day, end_day, low, high = (compiler.process(c, **kw) for c in element.clauses)
    part = f"({slot} % {DAY_SLOTS})"
    return (
        f"({slot} >= {first_day} * {DAY_SLOTS} AND {slot} < {end_day} * {DAY_SLOTS} "
        f"AND {part} >= {low} AND {part} < {high})"
    )


@compiles(_day_parts, "postgresql")
def _day_parts_postgresql(element: _day_parts, compiler: SQLCompiler, **kw: Any) -> str:
    slot, first_day, end_day, low, high = (compiler.process(c, **kw) for c in element.clauses)
    return (
        f"{slot} = ANY (ARRAY(SELECT wa_day.d * {DAY_SLOTS} + wa_part.p "
        f"FROM generate_series({first_day}, {end_day} - 1) AS wa_day(d), "
        f"generate_series({low}, {high} - 1) AS wa_part(p)))"
    )


def _add(into: dict[int, list[int]], bucket: int, sums: Sequence[Any], sign: int = 1) -> None:
    found = into.setdefault(bucket, [0] * len(sums))
    for i, n in enumerate(sums):
        found[i] += sign * int(n or 0)


def bucket_statement(
    names: Sequence[str], first_slot: int, end_slot: int | None, width: int, offset: int, scope: Scope
) -> Executable:
    """The statement of the sums of the columns ``names`` per bucket over the slots
    ``[first_slot, end_slot)`` (``end_slot`` None: every slot from ``first_slot``) of the rollups
    in ``scope``, for :func:`bucket_sums`. ``width`` and ``offset`` are seconds; a width of whole
    days over a long range (at least :data:`LONG_RANGE_DAYS`) reads the daily rollups."""
    q = automation_rollups.c
    parts: list[Select[Any]] = []

    def slots(low: int, high: int | None) -> None:
        bucket = (q.slot * SLOT_SECONDS + offset) // width
        parts.append(
            select(bucket.label("own"), _NO_BUCKET, *(func.sum(q[n]) for n in names))
            .where(*scope.between(automation_rollups, "slot", low, high))
            .group_by(bucket)
        )

    first_day = -(-first_slot // DAY_SLOTS)
    last_day = end_slot // DAY_SLOTS if end_slot is not None else None
    # Up to the day after today when the range is open (no slot is later).
    days_end = last_day if last_day is not None else int(time.time()) // DAY_SECONDS + 2
    if width % DAY_SECONDS != 0 or offset % SLOT_SECONDS != 0 or days_end - first_day < LONG_RANGE_DAYS:
        slots(first_slot, end_slot)
        return _union(parts)
    slots(first_slot, first_day * DAY_SLOTS)
    if end_slot is not None and last_day is not None:
        slots(last_day * DAY_SLOTS, end_slot)
    # The zone's midnight as a slot of the UTC day; a day counts in the bucket of its larger part.
    boundary = (-offset % DAY_SECONDS) // SLOT_SECONDS
    head_moves = boundary * 2 <= DAY_SLOTS
    anchor = boundary if head_moves else 0
    d = automation_rollups_daily.c
    day_bucket = (d.day * DAY_SECONDS + anchor * SLOT_SECONDS + offset) // width
    parts.append(
        select(day_bucket.label("own"), _NO_BUCKET, *(func.sum(d[n]) for n in names))
        .where(*scope.between(automation_rollups_daily, "day", first_day, last_day))
        .group_by(day_bucket)
    )
    if boundary != 0:
        # The quarter hours of each day's smaller part: out of the day's bucket, into their own.
        own = (q.slot * SLOT_SECONDS + offset) // width
        counted = ((q.slot // DAY_SLOTS) * DAY_SECONDS + anchor * SLOT_SECONDS + offset) // width
        low, high = (0, boundary) if head_moves else (boundary, DAY_SLOTS)
        if scope.automation is not None:
            # The automation's stretch of the primary key, each slot tested for its part of the day.
            part = q.slot % DAY_SLOTS
            where = [
                *scope.between(automation_rollups, "slot", first_day * DAY_SLOTS, days_end * DAY_SLOTS),
                and_(part >= low, part < high),
            ]
        else:
            where = [*scope.matching(automation_rollups), _day_parts(q.slot, first_day, days_end, low, high)]
        parts.append(
            select(own.label("own"), counted.label("counted"), *(func.sum(q[n]) for n in names))
            .where(*where)
            .group_by(own, counted)
        )
    return _union(parts)


def _union(parts: list[Select[Any]]) -> Executable:
    return parts[0] if len(parts) == 1 else union_all(*parts)


# A part's rows whose sums count in one bucket only.
_NO_BUCKET = cast(null(), Integer).label("counted")


async def bucket_sums(session: AsyncSession, statement: Executable) -> dict[int, list[int]]:
    """Run a :func:`bucket_statement`: each row's sums added to its bucket (``own``) and, when it
    names one, taken from the bucket they were counted in (``counted``)."""
    found: dict[int, list[int]] = {}
    for own, counted, *sums in (await session.execute(statement)).all():
        _add(found, int(own), sums)
        if counted is not None:
            _add(found, int(counted), sums, -1)
    return found
