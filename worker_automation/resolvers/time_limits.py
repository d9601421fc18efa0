"""Time limits, enforced by the API whatever runs the job.

A pool worker ends a run at its automation's ``timeout_seconds`` itself (Celery's soft time limit)
and Celery kills the pool process a grace later (its hard limit); a dedicated machine stops a run
on its own clock. Neither can be relied on alone: a killed pool process reports nothing, and a
machine that hangs does not stop anything. So the leader also looks, every few seconds, for
EXECUTANDO jobs whose run started longer ago than their automation's limit plus
``TIME_LIMIT_GRACE_SECONDS``, and ends each FALHA ``timeout: ...``, as one attempt: the automation's
retry policy applies to it.

Each end is a conditional change on the status and task id that were seen (an operator, the
worker or recovery acting meanwhile wins), audited, announced, and a pool run's task is revoked
with terminate so it never overlaps a retry. The failure's ``exc_type`` is not one recovery writes,
so the machine's late report of that run is refused (409), never taken as the run's outcome.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import and_, or_, select

from worker_automation.catalog.registry import (
    TIME_LIMIT_GRACE_SECONDS,
    TIMEOUT_EXC_TYPE,
    timeout_message,
)
from worker_automation.domain.errors import Unavailable
from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import Job, JobStatus, Machine, utcnow
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, AuditNote
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.machines import hold_dedicated_runs
from worker_automation.resolvers.periodic import Periodic
from worker_automation.resolvers.retries import after_failure
from worker_automation.resolvers.rows import view_in
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

log = logging.getLogger(__name__)

TIME_LIMITS_ACTOR: Final = Actor("time_limits", "administrador")
# How often the leader looks for runs past their limit, and how many it ends per look.
CHECK_INTERVAL_SECONDS: Final = 2.0
ACT_LIMIT: Final = 500


@dataclass(frozen=True)
class OverdueRun:
    """A run found past its automation's limit: the job, the run (task id) and its limit."""

    job_id: int
    task_id: str | None
    timeout_seconds: float
    on_pool: bool


async def limits(services: Services) -> dict[str, float]:
    """Every automation with a time limit now (an admin's override included), and that limit in
    seconds."""
    current = await services.time_limits.current(services.db)
    return {key: seconds for key, seconds in current.items() if seconds is not None}


async def overdue_runs(services: Services, now: datetime | None = None) -> list[OverdueRun]:
    """EXECUTANDO jobs whose run started more than their limit plus the grace before ``now``."""
    timeouts = await limits(services)
    if not timeouts:
        return []
    now = now or utcnow()
    late = [
        and_(
            Job.automation_type == key,
            Job.data_inicio < now - timedelta(seconds=seconds + TIME_LIMIT_GRACE_SECONDS),
        )
        for key, seconds in timeouts.items()
    ]
    query = (
        select(Job.id, Job.task_id, Job.automation_type, Machine.queue)
        .outerjoin(Machine, Machine.id == Job.machine_id)
        .where(Job.status == JobStatus.EXECUTANDO.value, or_(*late))
        .order_by(Job.data_inicio)
        .limit(ACT_LIMIT)
    )
    async with services.db.reader() as session:
        rows = (await session.execute(query)).all()
    return [OverdueRun(r.id, r.task_id, timeouts[r.automation_type], r.queue is not None) for r in rows]


async def end_overdue_run(
    services: Services, run: OverdueRun, actor: Actor = TIME_LIMITS_ACTOR
) -> JobView | None:
    """End ``run`` FALHA ``timeout: ...`` and apply the retry policy; None when the job moved on
    meanwhile (no longer EXECUTANDO under that task)."""
    message = timeout_message(run.timeout_seconds)
    async with services.db.session() as session:
        row = await session.scalar(select(Job).where(Job.id == run.job_id).with_for_update())
        if row is None or row.status != JobStatus.EXECUTANDO.value or row.task_id != run.task_id:
            return None
        if not run.on_pool:
            await hold_dedicated_runs(session, [row])
        row.status = JobStatus.FALHA.value
        row.data_fim = utcnow()
        row.mensagem_erro = message
        # Not an exc_type recovery writes: a late report of this run cannot replace it.
        row.result = {"exc_type": TIMEOUT_EXC_TYPE, "exc_message": message, "traceback": None}
        detail = {"task_id": run.task_id, "timeout_seconds": run.timeout_seconds}
        await AuditNote(f"worker:{run.job_id}", detail).record_in(session, actor, "time_limit")
        await session.flush()
        view = await view_in(session, row)
    log.warning(
        "time limit: job %s ended (%s), its run %s passed %g s",
        run.job_id,
        message,
        run.task_id,
        run.timeout_seconds,
    )
    await announce(services, EventKind.FAILED, [view])
    if run.on_pool and run.task_id:
        # Should its pool process still run it, it must stop before any retry starts.
        with contextlib.suppress(Unavailable):
            await services.broker.revoke(run.task_id, terminate=True)
    return await after_failure(services, view, TIMEOUT_EXC_TYPE)


async def end_overdue_runs(services: Services) -> int:
    """One look: every run past its limit (and grace) ended; how many were."""
    ended = 0
    for run in await overdue_runs(services):
        if await end_overdue_run(services, run) is not None:
            ended += 1
    return ended


def _interval(_settings: Settings) -> float:
    # Always scheduled: an admin may give any automation a limit at run time.
    return CHECK_INTERVAL_SECONDS


def time_limits_periodic() -> Periodic:
    """The check as periodic work of the leader."""
    return Periodic("time_limits", _interval, end_overdue_runs)
