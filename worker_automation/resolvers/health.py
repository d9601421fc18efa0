"""Health of one automation over days: finished jobs and run-time percentiles per day.

Read from ``automation_rollups`` (quarter hours of UTC, kept by triggers, never deleted by
retention; whole UTC days from ``automation_rollups_daily``, see ``resolvers.rollup_reads``), so
a day keeps its counts after its jobs are pruned and the read costs the same at a thousand rows
or ten million. A day is a day of ``WA_TIMEZONE``: its slots are chosen when read, so
a change of zone needs no rewrite. Percentiles come from the summed histograms (see
:mod:`worker_automation.models.rollup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise
from typing import Annotated, Final
from zoneinfo import ZoneInfo

from sqlalchemy import Executable, Integer, and_, func, select, values
from sqlalchemy import column as sql_column

from worker_automation.domain.ranges import check_range
from worker_automation.domain.shapes import Doc
from worker_automation.models import utcnow
from worker_automation.models.rollup import (
    DURATION_BOUNDS_MS,
    DURATION_COLUMNS,
    SLOT_SECONDS,
    automation_rollups,
)
from worker_automation.resolvers.history import check_automation
from worker_automation.resolvers.rollup_reads import Scope, bucket_statement, bucket_sums
from worker_automation.resolvers.services import Services

MAX_DAYS: Final = 400


@dataclass(frozen=True)
class HealthDay:
    """How one automation's jobs ended on one day, and how long its runs took."""

    day: Annotated[str, Doc("The day (YYYY-MM-DD) in WA_TIMEZONE.")]
    completed: Annotated[int, Doc("Jobs that ended CONCLUIDO that day.")] = 0
    failed: Annotated[int, Doc("Jobs that ended FALHA that day.")] = 0
    cancelled: Annotated[int, Doc("Jobs that ended CANCELADO that day.")] = 0
    success_rate: Annotated[
        float | None, Doc("completed / (completed + failed), 0 to 1; null when no run ended.")
    ] = None
    p50_ms: Annotated[
        float | None, Doc("Median run time (claim to end) of the runs that ended, within one bucket.")
    ] = None
    p95_ms: Annotated[float | None, Doc("95th percentile run time, within one bucket.")] = None


def check_days(days: int) -> int:
    return check_range(days, "days", 1, MAX_DAYS)


def day_slots(first: date, days: int, tz: ZoneInfo) -> list[int]:
    """The first slot of each of ``days`` days from ``first`` in ``tz``, and the slot after the last."""
    starts = []
    for n in range(days + 1):
        midnight = datetime.combine(first + timedelta(days=n), time(), tzinfo=tz)
        starts.append(int(midnight.timestamp()) // SLOT_SECONDS)
    return starts


def histogram_percentile(counts: list[int], fraction: float) -> float | None:
    """The ``fraction`` percentile of runs counted per bucket, interpolated inside its bucket (the
    open last bucket answers its lower bound)."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = fraction * total
    seen = 0
    for index, n in enumerate(counts):
        if n <= 0:
            continue
        if seen + n >= rank:
            low = DURATION_BOUNDS_MS[index - 1] if index else 0
            if index == len(DURATION_BOUNDS_MS):
                return float(low)
            high = DURATION_BOUNDS_MS[index]
            return round(low + (high - low) * max(0.0, rank - seen) / n, 1)
        seen += n
    return float(DURATION_BOUNDS_MS[-1])


async def automation_health(services: Services, automation_type: str, days: int = 30) -> list[HealthDay]:
    """The last ``days`` days of ``automation_type`` (today included), oldest first, every day present."""
    check_automation(automation_type)
    check_days(days)
    tz = services.settings.tz
    first = utcnow().astimezone(tz).date() - timedelta(days=days - 1)
    bounds = day_slots(first, days, tz)
    key = ("automation_health", automation_type, first, days)
    found = await services.db.shared.run(key, lambda: _read_days(services, automation_type, bounds))
    answer = []
    for index in range(days):
        day = (first + timedelta(days=index)).isoformat()
        row = found.get(index)
        if row is None:
            answer.append(HealthDay(day))
            continue
        completed, failed, cancelled, *histogram = row
        ran = completed + failed
        answer.append(
            HealthDay(
                day,
                completed,
                failed,
                cancelled,
                round(completed / ran, 4) if ran > 0 else None,
                histogram_percentile(histogram, 0.5),
                histogram_percentile(histogram, 0.95),
            )
        )
    return answer


_SUMMED: Final = ("completed", "failed", "cancelled", *DURATION_COLUMNS)


@lru_cache(maxsize=256)
def _days_statement(scope: Scope, first_slot: int, end_slot: int, width: int) -> Executable:
    """The statement of a window of days of one length, kept: the same window is read until the
    zone's midnight, and building the statement and its cache key costs about 1.4 ms of the API's
    CPU per read."""
    return bucket_statement(_SUMMED, first_slot, end_slot, width, -first_slot * SLOT_SECONDS, scope)


async def _read_days(
    services: Services, automation: str, bounds: list[int], *, by_ranges: bool | None = None
) -> dict[int, list[int]]:
    """Summed counts and histogram per day index, for the days with any rollup. Days of one length
    (no change of offset in the window) are a division of the slot; otherwise each slot is joined
    to its day's range."""
    r = automation_rollups.c
    scope = Scope(automation=automation)
    lengths = {high - low for low, high in pairwise(bounds)}
    if by_ranges is None:
        by_ranges = len(lengths) != 1
    if not by_ranges:
        # Day i is bucket i when the slots are counted from the first day's midnight.
        width = lengths.pop() * SLOT_SECONDS
        async with services.db.reader() as session:
            return await bucket_sums(session, _days_statement(scope, bounds[0], bounds[-1], width))
    days = (
        values(sql_column("i", Integer), sql_column("lo", Integer), sql_column("hi", Integer), name="days")
        .data([(i, low, high) for i, (low, high) in enumerate(pairwise(bounds))])
        .cte("days")
    )
    joined = (
        select(days.c.i, *(func.sum(r[name]) for name in _SUMMED))
        .select_from(days)
        .join(automation_rollups, and_(*scope.between(automation_rollups, "slot", days.c.lo, days.c.hi)))
        .group_by(days.c.i)
    )
    async with services.db.reader() as session:
        rows = (await session.execute(joined)).all()
    return {int(row[0]): [int(n or 0) for n in row[1:]] for row in rows}
