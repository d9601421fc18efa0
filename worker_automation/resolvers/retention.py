"""Retention: finished jobs older than a number of days are deleted, a batch per statement.
A dry run counts them and deletes nothing, so an operator sees what a prune would take first.

Each batch is its own short transaction, so the table's writers (claims, reports) never wait long
behind it; the per-(queue, status) counters follow through their triggers, the attempts through
theirs. The rollups of finished jobs (``automation_rollups``: health per day, throughput over
months) are left as they are: a deleted job still counts in its day. Run by hand
(``pruneWorkers``, ``worker-automation prune``) and periodically by the leader with
``WA_RETENTION_DAYS``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from sqlalchemy import ColumnElement, delete, func, select

from worker_automation.domain.ranges import check_range
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.periodic import Periodic

if TYPE_CHECKING:  # a prune from the command line needs the database alone
    from worker_automation.resolvers.services import Services
    from worker_automation.settings import Settings

log = logging.getLogger(__name__)

BATCH: Final = 1000
FINISHED: Final = (JobStatus.CONCLUIDO.value, JobStatus.FALHA.value, JobStatus.CANCELADO.value)
# Batches one periodic run deletes at most; the rest goes at the next run.
PERIODIC_BATCHES: Final = 200
PERIODIC_SECONDS: Final = 600.0
RETENTION_ACTOR: Final = Actor("retention", None)


# A century: anything longer is a typo (and past what a date can count back from today).
MAX_DAYS: Final = 36_500


def check_days(value: int, field: str = "older_than_days") -> int:
    return check_range(value, field, 0, MAX_DAYS)


def _finished_before(older_than_days: int) -> ColumnElement[bool]:
    """Finished jobs that ended more than ``older_than_days`` days ago."""
    cutoff = utcnow() - timedelta(days=older_than_days)
    return (Job.data_fim < cutoff) & Job.status.in_(FINISHED)


async def count_finished(db: Database, older_than_days: int) -> int:
    """How many jobs :func:`delete_finished` would delete now."""
    async with db.session() as session:
        counted = await session.scalar(
            select(func.count()).select_from(Job).where(_finished_before(older_than_days))
        )
    return int(counted or 0)


async def delete_finished(
    db: Database,
    older_than_days: int,
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Delete finished jobs that ended more than ``older_than_days`` days ago; how many went.
    ``progress`` hears the running total after each batch."""
    chosen = select(Job.id).where(_finished_before(older_than_days)).limit(batch).scalar_subquery()
    statement = delete(Job).where(Job.id.in_(chosen)).execution_options(synchronize_session=False)
    total = batches = 0
    while max_batches is None or batches < max_batches:
        async with db.transaction() as conn:
            deleted = (await conn.execute(statement)).rowcount
        batches += 1
        total += deleted
        if progress is not None:
            progress(total)
        if deleted < batch:
            break
    return total


async def prune_jobs(
    db: Database,
    actor: Actor,
    older_than_days: int,
    progress: Callable[[int], None] | None = None,
    *,
    dry_run: bool = False,
) -> int:
    """Delete, by hand, finished jobs older than ``older_than_days`` days (audited); with
    ``dry_run``, only count them (nothing deleted, nothing audited)."""
    days = check_days(older_than_days)
    if dry_run:
        return await count_finished(db, days)
    async with audited(db, actor, "prune_workers", None) as note:
        note.detail = {"older_than_days": days}
        deleted = await delete_finished(db, days, progress=progress)
        note.detail["deleted"] = deleted
    return deleted


async def apply_retention(services: Services) -> int:
    """The periodic run: ``WA_RETENTION_DAYS`` (0 = keep everything), bounded per run."""
    days = services.settings.retention_days
    if days <= 0:
        return 0
    deleted = await delete_finished(services.db, days, max_batches=PERIODIC_BATCHES)
    if deleted:
        async with audited(services.db, RETENTION_ACTOR, "retention", None) as note:
            note.detail = {"older_than_days": days, "deleted": deleted}
        log.info("retention: %d finished job(s) older than %d day(s) deleted", deleted, days)
    return deleted


def retention_interval(settings: Settings) -> float:
    """Seconds between periodic runs (0: retention off)."""
    return PERIODIC_SECONDS if settings.retention_days > 0 else 0.0


def retention_periodic() -> Periodic:
    """Retention as periodic work of the leader."""
    return Periodic("retention", retention_interval, apply_retention)
