"""Bulk actions: retry or cancel every job the list's filter matches, in one transaction.

Each job keeps its own rules (:mod:`worker_automation.resolvers.transitions`): a running job is
terminated on cancel, a finished one is left as it is, only FALHA and CANCELADO are retried. The
answer says how many jobs the filter matched and which ones changed; one audit entry covers it.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from worker_automation.domain.errors import Unavailable
from worker_automation.domain.ranges import check_range
from worker_automation.domain.shapes import Doc
from worker_automation.domain.vocabulary import Action, EventKind
from worker_automation.models import Job, JobStatus
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.dispatch import Send, send_all
from worker_automation.resolvers.job_filter import JobFilter, filter_conditions
from worker_automation.resolvers.job_views import JobView, enriched_select, views_of
from worker_automation.resolvers.machines import hold_dedicated_runs
from worker_automation.resolvers.retries import send_at
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.transitions import allows, held_until, mark_cancelled, mark_retried

# Jobs one bulk action may take (one transaction holds their row locks).
MAX_BULK: Final = 5000
DEFAULT_BULK: Final = 1000


@dataclass(frozen=True)
class BulkResult:
    """``matched``: jobs the filter matched (up to the limit); ``ids``: those that changed."""

    matched: Annotated[int, Doc("Jobs the filter matched (up to the limit).")]
    changed: Annotated[int, Doc("Jobs the action changed (their own rules allowed it).")]
    ids: Annotated[list[int], Doc("Ids of the jobs that changed.")]


def check_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_BULK
    return check_range(limit, "limit", 1, MAX_BULK)


async def _locked(session: AsyncSession, services: Services, filters: JobFilter, limit: int) -> list[Job]:
    """The jobs the list would show first (newest first), locked until the transaction ends."""
    conds, parameters = filter_conditions(filters, services.settings.queues)
    statement = select(Job).where(*conds).order_by(Job.id.desc()).limit(limit).with_for_update()
    return list((await session.scalars(statement, parameters)).all())


async def _views(session: AsyncSession, ids: list[int]) -> list[JobView]:
    if not ids:
        return []
    rows = await session.execute(enriched_select().where(Job.id.in_(ids)).order_by(Job.id.desc()))
    return views_of(rows)


async def cancel_jobs(
    services: Services, actor: Actor, filters: JobFilter, limit: int | None = None
) -> BulkResult:
    """Cancel the queued and running jobs among those ``filters`` match (running ones terminated)."""
    count = check_limit(limit)
    async with audited(services.db, actor, "cancel_workers", None) as note:
        note.detail = {"filter": asdict(filters), "limit": count}
        async with services.db.session() as session:
            rows = await _locked(session, services, filters, count)
            targets = [row for row in rows if allows(Action.CANCEL, row.status)]
            tasks = [row.task_id for row in targets if row.task_id]
            try:
                await services.broker.revoke_many(tasks, terminate=True)
            except Unavailable:
                if any(row.status == JobStatus.EXECUTANDO.value for row in targets):
                    # Running somewhere: marking them cancelled would be a lie; nothing changes.
                    raise
            await hold_dedicated_runs(session, targets)
            for row in targets:
                mark_cancelled(row)
            await session.flush()
            views = await _views(session, [row.id for row in targets])
        result = BulkResult(len(rows), len(views), [v.id for v in views])
        note.detail.update(matched=result.matched, changed=result.changed, worker_ids=result.ids)
    await announce(services, EventKind.CANCELLED, views)
    return result


async def retry_jobs(
    services: Services, actor: Actor, filters: JobFilter, limit: int | None = None
) -> BulkResult:
    """Queue again, as new tasks, the FALHA and CANCELADO jobs among those ``filters`` match."""
    count = check_limit(limit)
    async with audited(services.db, actor, "retry_workers", None) as note:
        note.detail = {"filter": asdict(filters), "limit": count}
        async with services.db.session() as session:
            rows = await _locked(session, services, filters, count)
            targets = [row for row in rows if allows(Action.RETRY, row.status)]
            # Those whose machine is still stopping the run that was ended wait, unsent.
            held: dict[int, datetime] = {}
            for row in targets:
                hold = held_until(row)
                mark_retried(row, None if hold is not None else str(uuid.uuid4()))
                row.next_attempt_at = hold
                if hold is not None:
                    held[row.id] = hold
            await session.flush()
            views = await _views(session, [row.id for row in targets])
        result = BulkResult(len(rows), len(views), [v.id for v in views])
        note.detail.update(matched=result.matched, changed=result.changed, worker_ids=result.ids)
        await announce(services, EventKind.CREATED, views)
        sends = [
            Send(v.id, str(v.task_id), registered(v.automation_type).task_name, v.queue, v.priority)
            for v in views
            if v.id not in held
        ]
        for job_id, hold in held.items():
            send_at(services, job_id, hold)
        # One round trip to the broker for all of them.
        kept = await send_all(services, sends)
        if kept:
            raise Unavailable(
                f"Broker indisponivel: {len(kept)} worker(s) ficaram AGENDADO sem task no broker.",
                worker_ids=kept,
            )
    return result
