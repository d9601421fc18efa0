"""History computed from the job rows: finished jobs per time bucket, and run-time percentiles.

Both read only finished rows in a time range, through indexes that carry every column they need
(``ix_workers_history``, ``ix_workers_automation_history``), so PostgreSQL answers from the
index alone. Throughput in buckets of whole quarter hours (an hour, a day) reads the rollups
instead (``automation_rollups``; buckets of whole days mostly ``automation_rollups_daily``, see
``resolvers.rollup_reads``): its cost does not grow with the rows, and jobs retention deleted
still count. Identical questions asked at the same moment share one read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final

from sqlalchemy import ColumnElement, Integer, cast, func, select

from worker_automation.domain.errors import BadInput
from worker_automation.domain.shapes import Doc
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.models.rollup import COUNT_COLUMNS, SLOT_SECONDS
from worker_automation.resolvers.job_filter import check_queue
from worker_automation.resolvers.rollup_reads import Scope, bucket_statement, bucket_sums
from worker_automation.resolvers.services import Services

DEFAULT_WINDOW: Final = timedelta(hours=24)
MAX_BUCKETS: Final = 1000
MAX_BUCKET_MINUTES: Final = 7 * 24 * 60
# SQLite has no percentile function: the run times are read and ranked in Python, at most this
# many (the most recent) per question.
SQLITE_DURATION_ROWS: Final = 200_000
FINISHED: Final = (JobStatus.CONCLUIDO.value, JobStatus.FALHA.value, JobStatus.CANCELADO.value)
# Runs whose time is measured: those that ran to an end of their own (not cancelled).
RAN: Final = (JobStatus.CONCLUIDO.value, JobStatus.FALHA.value)


@dataclass(frozen=True)
class Bucket:
    """Jobs that finished in ``[bucket_start, bucket_start + width)``, by how they ended."""

    bucket_start: Annotated[datetime, Doc("Start of the bucket (inclusive).")]
    completed: Annotated[int, Doc("Jobs that ended CONCLUIDO in it.")] = 0
    failed: Annotated[int, Doc("Jobs that ended FALHA in it.")] = 0
    cancelled: Annotated[int, Doc("Jobs that ended CANCELADO in it.")] = 0


@dataclass(frozen=True)
class Durations:
    """Run time (claim to end) of finished runs, in milliseconds; None when there were none."""

    count: Annotated[int, Doc("Runs measured (CONCLUIDO or FALHA).")]
    p50_ms: Annotated[float | None, Doc("Median.")]
    p95_ms: Annotated[float | None, Doc("95th percentile.")]
    p99_ms: Annotated[float | None, Doc("99th percentile.")]
    max_ms: Annotated[float | None, Doc("Longest.")]


def _since(value: datetime | None, field: str = "since") -> datetime:
    now = utcnow()
    if value is None:
        return now - DEFAULT_WINDOW
    if value.tzinfo is None:
        raise BadInput(field, f"{field} precisa de fuso horario (ex.: 2026-12-01T08:00:00-03:00)")
    if value > now:
        raise BadInput(field, f"{field} esta no futuro")
    return value


def check_automation(automation_type: str | None) -> None:
    from worker_automation.catalog.registry import AUTOMATION_REGISTRY

    if automation_type is not None and automation_type not in AUTOMATION_REGISTRY:
        raise BadInput("automation_type", f"automation_type desconhecido: {automation_type!r}")


def _bucket_of(services: Services, column: Any, width: int, offset: int) -> ColumnElement[Any]:
    """The number of the ``width``-second bucket a timestamp column falls in, in SQL."""
    if services.settings.is_sqlite:
        # The text is cut to whole seconds first: strftime rounds to milliseconds, which put a job
        # ending in the last half millisecond of a bucket into the next one.
        whole_seconds = func.substr(column, 1, 19)
        return (cast(func.strftime("%s", whole_seconds), Integer) + offset) // width
    # date_part is double precision: EXTRACT is numeric since PostgreSQL 14, and arithmetic on
    # numeric took half of the read's time. A double keeps microseconds at today's epoch.
    return func.floor((func.date_part("epoch", column) + offset) / width)


async def throughput(
    services: Services,
    since: datetime | None = None,
    bucket_minutes: int = 60,
    queue: str | None = None,
    automation_type: str | None = None,
) -> list[Bucket]:
    """Jobs finished per bucket from ``since`` (default: 24 hours ago) to now, oldest first, every
    bucket present. Buckets are aligned on the configured zone's clock (a 1440-minute bucket is
    that zone's day): 90 days by day is 91 buckets, well within :data:`MAX_BUCKETS`."""
    start = _since(since)
    if isinstance(bucket_minutes, bool) or not isinstance(bucket_minutes, int):
        raise BadInput("bucket_minutes", "bucket_minutes deve ser um inteiro")
    if not 1 <= bucket_minutes <= MAX_BUCKET_MINUTES:
        raise BadInput("bucket_minutes", f"bucket_minutes deve estar entre 1 e {MAX_BUCKET_MINUTES}")
    if queue is not None:
        check_queue(queue, services.settings.queues)
    check_automation(automation_type)
    width = bucket_minutes * 60
    now = utcnow()
    # Buckets start on the zone's clock: its offset is added before dividing.
    offset = int((now.astimezone(services.settings.tz).utcoffset() or timedelta()).total_seconds())
    first = (math.floor(start.timestamp()) + offset) // width
    last = (math.floor(now.timestamp()) + offset) // width
    if last - first + 1 > MAX_BUCKETS:
        raise BadInput(
            "since",
            f"since cobre buckets demais de {bucket_minutes} min (max. {MAX_BUCKETS}): "
            "aumente bucket_minutes",
        )
    key = ("throughput", start, bucket_minutes, queue, automation_type)
    if width % SLOT_SECONDS == 0 and offset % SLOT_SECONDS == 0:
        counts = await services.db.shared.run(
            key, lambda: _rolled_up_counts(services, start, width, offset, queue, automation_type)
        )
    else:
        counts = await services.db.shared.run(
            key, lambda: _bucket_counts(services, start, width, offset, queue, automation_type)
        )
    buckets = []
    for index in range(first, last + 1):
        found = counts.get(index, {})
        buckets.append(
            Bucket(
                datetime.fromtimestamp(index * width - offset, tz=UTC),
                found.get(JobStatus.CONCLUIDO.value, 0),
                found.get(JobStatus.FALHA.value, 0),
                found.get(JobStatus.CANCELADO.value, 0),
            )
        )
    return buckets


async def _bucket_counts(
    services: Services,
    start: datetime,
    width: int,
    offset: int,
    queue: str | None,
    automation: str | None,
    before: datetime | None = None,
) -> dict[int, dict[str, int]]:
    bucket = _bucket_of(services, Job.data_fim, width, offset).label("bucket")
    conds: list[ColumnElement[bool]] = [Job.data_fim >= start, Job.status.in_(FINISHED)]
    if before is not None:
        conds.append(Job.data_fim < before)
    if queue is not None:
        conds.append(Job.queue == queue)
    if automation is not None:
        conds.append(Job.automation_type == automation)
    statement = select(bucket, Job.status, func.count()).where(*conds).group_by(bucket, Job.status)
    found: dict[int, dict[str, int]] = {}
    async with services.db.reader() as session:
        for index, status, n in await session.execute(statement):
            found.setdefault(int(index), {})[status] = int(n)
    return found


async def _rolled_up_counts(
    services: Services, start: datetime, width: int, offset: int, queue: str | None, automation: str | None
) -> dict[int, dict[str, int]]:
    """Buckets made of whole quarter hours: the rollups from the first quarter hour that starts at
    or after ``start`` (they keep jobs retention deleted), the jobs themselves before it."""
    first_slot = -(-math.ceil(start.timestamp()) // SLOT_SECONDS)
    head = datetime.fromtimestamp(first_slot * SLOT_SECONDS, tz=UTC)
    found = await _bucket_counts(services, start, width, offset, queue, automation, before=head)
    statement = bucket_statement(COUNT_COLUMNS, first_slot, None, width, offset, Scope(automation, queue))
    async with services.db.reader() as session:
        sums = await bucket_sums(session, statement)
    for index, counts in sums.items():
        into = found.setdefault(index, {})
        for status, n in zip(FINISHED, counts, strict=True):
            into[status] = into.get(status, 0) + n
    return found


async def durations(
    services: Services, automation_type: str | None = None, since: datetime | None = None
) -> Durations:
    """Percentiles of the run time of the runs that ended (CONCLUIDO or FALHA) since ``since``
    (default: 24 hours ago), for one automation or all."""
    start = _since(since)
    check_automation(automation_type)
    key = ("durations", start, automation_type)
    return await services.db.shared.run(key, lambda: _durations(services, start, automation_type))


def _conditions(start: datetime, automation: str | None) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = [
        Job.data_fim >= start,
        Job.status.in_(RAN),
        Job.data_inicio.is_not(None),
    ]
    if automation is not None:
        conds.append(Job.automation_type == automation)
    return conds


async def _durations(services: Services, start: datetime, automation: str | None) -> Durations:
    conds = _conditions(start, automation)
    if services.settings.is_sqlite:
        return await _durations_in_python(services, conds)
    ms = func.date_part("epoch", Job.data_fim - Job.data_inicio) * 1000
    statement = select(
        func.count(),
        func.percentile_cont(0.5).within_group(ms),
        func.percentile_cont(0.95).within_group(ms),
        func.percentile_cont(0.99).within_group(ms),
        func.max(ms),
    ).where(*conds)
    async with services.db.reader() as session:
        row = (await session.execute(statement)).one()
    count = int(row[0])
    if not count:
        return Durations(0, None, None, None, None)
    return Durations(count, *(round(float(value), 1) for value in row[1:]))


def percentile(ordered: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont)."""
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def _durations_in_python(services: Services, conds: list[ColumnElement[bool]]) -> Durations:
    statement = (
        select(Job.data_inicio, Job.data_fim)
        .where(*conds)
        .order_by(Job.data_fim.desc())
        .limit(SQLITE_DURATION_ROWS)
    )
    async with services.db.reader() as session:
        rows = (await session.execute(statement)).all()
    times = sorted((end - begin).total_seconds() * 1000 for begin, end in rows if begin and end)
    if not times:
        return Durations(0, None, None, None, None)
    p50, p95, p99 = (round(percentile(times, f), 1) for f in (0.5, 0.95, 0.99))
    return Durations(len(times), p50, p95, p99, round(times[-1], 1))
