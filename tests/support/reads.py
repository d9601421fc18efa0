"""Job reads the tests exercise the list machinery with, outside any GraphQL or REST shape: a
keyset slice of views, and the jobs that ended last."""

from __future__ import annotations

from worker_automation.models import Job, JobStatus
from worker_automation.models.database import Database
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_views import JobView, enriched_select, views_of
from worker_automation.resolvers.reads import Slice, slice_after


async def list_jobs_after(
    db: Database,
    queues: dict[str, int],
    filters: JobFilter,
    first: int,
    after: int | None,
    *,
    documents: bool = True,
) -> Slice[JobView]:
    """The ``first`` newest jobs older than the job ``after`` (the newest when None), filtered
    (without ``documents``: no context nor result)."""
    return await slice_after(db, queues, filters, first, after, views_of, documents=documents)


async def recent_terminal(db: Database, limit: int = 20) -> list[JobView]:
    """The last ``limit`` rows that ended (CONCLUIDO, FALHA, CANCELADO), newest first."""
    terminal = [JobStatus.CONCLUIDO.value, JobStatus.FALHA.value, JobStatus.CANCELADO.value]
    async with db.reader() as session:
        rows = await session.execute(
            enriched_select()
            .where(Job.status.in_(terminal), Job.data_fim.is_not(None))
            .order_by(Job.data_fim.desc(), Job.id.desc())
            .limit(limit)
        )
        return views_of(rows)
