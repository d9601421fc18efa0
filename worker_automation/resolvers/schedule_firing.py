"""Firing schedules: each occurrence creates one job, whoever fires it and however often.

The leader's periodic tick looks for enabled schedules whose ``next_run_at`` has come. Firing one
is one transaction: a compare-and-set UPDATE moves ``next_run_at`` from the occurrence it read to
the next occurrence after now, then the job is inserted. A second replica (a leader change, a
restart mid-tick) racing for the same occurrence finds ``next_run_at`` moved and creates nothing,
so correctness does not rest on the leader lock alone. Occurrences missed while nobody ran fire
once on return, since the next one is counted from now. Each job links back through its
``metadata_json.schedule_id``.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any, Final, cast

from sqlalchemy import Table, bindparam, insert, select, update

from worker_automation.catalog.forms import validate_context
from worker_automation.domain.errors import BadInput, Conflict, NotFound
from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import Job, JobStatus, Schedule, utcnow
from worker_automation.models.database import Executor
from worker_automation.resolvers.announce import announce
from worker_automation.resolvers.audit import Actor, AuditNote, audited
from worker_automation.resolvers.automations import effective
from worker_automation.resolvers.dispatch import Send, send_all
from worker_automation.resolvers.job_views import JobView, view_of
from worker_automation.resolvers.periodic import Periodic
from worker_automation.resolvers.rows import client_name_of
from worker_automation.resolvers.schedules import MSG_SCHEDULE_NOT_FOUND, next_occurrence
from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)

SCHEDULER_ACTOR: Final = Actor("scheduler", None)
# How often the leader looks for due occurrences, and how many it fires per look.
TICK_SECONDS: Final = 5.0
DUE_PER_TICK: Final = 100

# The compare-and-set: only the caller that read this occurrence as next moves it forward.
_ADVANCE = (
    update(Schedule)
    .where(
        Schedule.id == bindparam("schedule"),
        Schedule.enabled.is_(True),
        Schedule.next_run_at == bindparam("seen", type_=Schedule.next_run_at.type),
    )
    .values(next_run_at=bindparam("next"), last_run_at=bindparam("now"))
    .returning(Schedule.automation_type, Schedule.cliente_id, Schedule.context, Schedule.priority)
)
_JOBS = cast(Table, Job.__table__)
_INSERT_JOB = insert(_JOBS).returning(*_JOBS.columns)


async def _create_job(conn: Executor, schedule: Any, schedule_id: int) -> tuple[JobView, str]:
    """Insert the schedule's job in the caller's transaction; its view and task name. BadInput or
    Conflict when the automation is disabled or the context no longer fits its form."""
    automation = await effective(conn, schedule.automation_type)
    if not automation.enabled:
        raise Conflict(f"Automacao '{automation.key}' esta desabilitada.", status="disabled")
    clean = validate_context(automation.form, schedule.context or {})
    now = utcnow()
    row = (
        await conn.execute(
            _INSERT_JOB,
            {
                "task_id": str(uuid.uuid4()),
                "cliente_id": schedule.cliente_id,
                "status": JobStatus.AGENDADO.value,
                "automation_type": automation.key,
                "queue": automation.queue,
                "priority": schedule.priority,
                "retry_count": 0,
                "progress": 0,
                "context": clean,
                "metadata_json": {"schedule_id": schedule_id},
                "created_at": now,
                "updated_at": now,
            },
        )
    ).one()
    await conn.execute(update(Schedule).where(Schedule.id == schedule_id).values(last_worker_id=row.id))
    return view_of(row, await client_name_of(conn, row.cliente_id)), automation.task_name


async def _send(services: Services, view: JobView, task_name: str) -> None:
    await announce(services, EventKind.CREATED, [view])
    kept = await send_all(services, [Send(view.id, str(view.task_id), task_name, view.queue, view.priority)])
    if kept:
        # The row stays AGENDADO without a task; the reconciler sends it when the broker is back.
        log.warning("schedule job %d recorded but not sent: broker unavailable", view.id)


async def fire(services: Services, schedule_id: int, occurrence: datetime, now: datetime) -> JobView | None:
    """Fire ``occurrence`` of the schedule if nobody did yet: the job, or None (fired elsewhere,
    disabled meanwhile, or the job could not be made, which is audited and skips the occurrence)."""
    job: tuple[JobView, str] | None = None
    note = AuditNote(f"schedule:{schedule_id}")
    async with services.db.transaction() as conn:
        found = (
            await conn.execute(select(Schedule.cron, Schedule.timezone).where(Schedule.id == schedule_id))
        ).first()
        if found is None:
            return None
        following = next_occurrence(found.cron, found.timezone, now)
        parameters = {"schedule": schedule_id, "seen": occurrence, "next": following, "now": now}
        claimed = (await conn.execute(_ADVANCE, parameters)).first()
        if claimed is None:
            return None
        note.detail = {"occurrence": occurrence.isoformat(), "next_run_at": following.isoformat()}
        try:
            # Everything that can refuse is checked before the job's first write.
            job = await _create_job(conn, claimed, schedule_id)
        except (BadInput, Conflict) as exc:
            # The occurrence is used up all the same: it must not fire again at every tick.
            log.warning("schedule %d: occurrence skipped: %s", schedule_id, exc.message)
            note.detail["skipped"] = exc.message
        else:
            note.detail["worker_id"] = job[0].id
        await note.record_in(conn, SCHEDULER_ACTOR, "schedule_fired")
    if job is None:
        return None
    await _send(services, *job)
    return job[0]


async def fire_due(services: Services, now: datetime | None = None) -> int:
    """Fire every occurrence due at ``now`` (default: the clock); how many jobs were created."""
    moment = now or utcnow()
    async with services.db.reader() as session:
        due = (
            await session.execute(
                select(Schedule.id, Schedule.next_run_at)
                .where(Schedule.enabled.is_(True), Schedule.next_run_at <= moment)
                .order_by(Schedule.next_run_at)
                .limit(DUE_PER_TICK)
            )
        ).all()
    created = 0
    for schedule_id, occurrence in due:
        if occurrence is not None and await fire(services, schedule_id, occurrence, moment) is not None:
            created += 1
    return created


async def run_schedule_now(services: Services, actor: Actor, schedule_id: int) -> JobView:
    """Create the schedule's job now, outside its timetable (``next_run_at`` unchanged)."""
    async with audited(services.db, actor, "run_schedule_now", f"schedule:{schedule_id}") as note:
        async with services.db.transaction() as conn:
            schedule = (
                await conn.execute(
                    select(Schedule.automation_type, Schedule.cliente_id, Schedule.context, Schedule.priority)
                    .where(Schedule.id == schedule_id)
                    .with_for_update()
                )
            ).first()
            if schedule is None:
                raise NotFound(MSG_SCHEDULE_NOT_FOUND, schedule_id=schedule_id)
            view, task_name = await _create_job(conn, schedule, schedule_id)
            touch = update(Schedule).where(Schedule.id == schedule_id).values(last_run_at=utcnow())
            await conn.execute(touch)
            note.detail = {"worker_id": view.id}
    await _send(services, view, task_name)
    return view


def schedules_periodic() -> Periodic:
    """Firing due schedules as periodic work of the leader."""
    return Periodic("schedules", lambda _settings: TICK_SECONDS, fire_due)
